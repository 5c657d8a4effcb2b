#!/usr/bin/env bash
# Measures the webhook pipeline end to end, change to webhook received, in
# the embedded mode and the Kafka+Redis mode, and prints p50/p99 latency at
# a fixed rate, sustained deliveries per second off a backlog, and the
# healthy endpoint's latency beside one that never answers. Targets (on 2
# cores): p99 under 250ms at 1,000 events/s; at least 3,000 deliveries/s;
# healthy p99 under 1s beside a dead endpoint.
#
#   bench/pipeline.sh [-mode embedded|kafka|embedded,kafka] [-rate 1000]
#                     [-duration 10s] [-backlog 30000] [-redis URL]
#
# Kafka mode runs kfake (franz-go's in-process Kafka) with three brokers and
# starts a redis-server (AOF, fsync every second) unless -redis is given.
# See bench/pipeline/main.go for what "change" covers.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v redis-server >/dev/null || { echo "redis-server is needed: apt-get install redis-server" >&2; exit 1; }
go build -o "${TMPDIR:-/tmp}/practicegw-bench-pipeline" ./bench/pipeline
exec "${TMPDIR:-/tmp}/practicegw-bench-pipeline" "$@"
