#!/usr/bin/env bash
# Measures the webhook pipeline end to end through the real binary and its
# HTTP API (each change a POST /v1/jobs/{id}/stage), in the embedded mode
# and the Kafka+Redis mode, and prints p50/p99 change -> webhook at a fixed
# rate, deliveries/s working off a backlog submitted by concurrent API
# clients, the healthy endpoint's latency beside one that never answers,
# and CPU per delivery and peak memory, beside the machine's own floor (a
# bbolt commit with fsync, a loopback HTTP round trip) measured in the same
# run. Issue 43's targets on 2 cores, embedded: p50 <= 5ms and p99 <= 15ms
# at 200 changes/s, >= 3,300 deliveries/s for 20,000 from 32 clients;
# Kafka mode within 2x.
#
#   bench/pipeline.sh [-mode embedded|kafka|embedded,kafka] [-rate 200]
#                     [-duration 20s] [-backlog 20000] [-concurrency 32]
#                     [-runs fixed,backlog,dead] [-bin PATH] [-redis URL]
#
# The Kafka mode runs kfake (franz-go's in-process Kafka, three brokers) in
# the benchmark's own process, which its CPU figure leaves out, and starts a
# redis-server (AOF, fsync every second) unless -redis is given.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v redis-server >/dev/null || { echo "redis-server is needed: apt-get install redis-server" >&2; exit 1; }
bin=${TMPDIR:-/tmp}/practicegw-bench-bin
go build -o "$bin" ./cmd/practicegw
go build -o "${TMPDIR:-/tmp}/practicegw-bench-pipeline" ./bench/pipeline
exec "${TMPDIR:-/tmp}/practicegw-bench-pipeline" -bin "$bin" "$@"
