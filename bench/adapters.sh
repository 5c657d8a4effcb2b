#!/usr/bin/env bash
# Added latency of the upstream adapters: N sequential calls to a stub
# upstream on loopback serving fixed bytes, made directly (GET and read the
# body) and through the adapter's List (breaker, budget, timeout, paging,
# translation to /v1 JSON), printed as p50 and p99 of both and the
# difference. Target: under 1 ms added at p99 on top of the upstream's own
# time.
#
#   bench/adapters.sh [calls] [karbon|xero|all]
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-5000}
SYSTEM=${2:-all}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/bench-adapters" ./bench/adapters
"$work/bench-adapters" -n "$N" -system "$SYSTEM"
