#!/usr/bin/env bash
# Measures the scale-out of the read models by firms: several gateways on
# one redis-server, each holding a share of the firms within a memory
# bound (replicas 2 by default), each firm on its own Karbon double. Prints
# each instance's peak RSS and records held against the total, read
# p50/p99 through holders and non-holders and their ratio (target: 1.5x at
# most), and the time until every firm is held again after a SIGKILL
# (target: 15 s); -compare adds the instances' RSS without a bound.
#
#   bench/scaleout.sh [-firms 20] [-records 200000] [-instances 3] [-replicas 2]
#                     [-memory 80MiB] [-duration 20s] [-rate 40] [-compare]
#                     [-gomemlimit 200MiB] [-profiles DIR]
#
# Smaller for a quick look: bench/scaleout.sh -firms 6 -records 12000.
# See bench/scaleout/main.go.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TMPDIR:-/tmp}/practicegw-bench
go build -o "$bin" ./cmd/practicegw
go build -o "${TMPDIR:-/tmp}/practicegw-bench-scaleout" ./bench/scaleout
exec "${TMPDIR:-/tmp}/practicegw-bench-scaleout" -bin "$bin" "$@"
