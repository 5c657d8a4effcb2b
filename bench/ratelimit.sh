#!/usr/bin/env bash
# Measures what the Redis rate limiter costs: GET /v1/jobs?limit=50 through
# the full gateway with practicegw_ratelimit on Redis, against the same
# gateway and route with the limiter removed from the Caddyfile, in one run,
# with the same load generator. Prints requests per second, p50, p99 and the
# differences. Target: at most 10% of throughput and 1 ms at p99.
#
#   bench/ratelimit.sh [duration-seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
CONNS=${2:-32}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server is needed: apt-get install redis-server" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 1 300); do curl -fs -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; exit 1; }

go build -o "$work/practicegw" ./cmd/practicegw
redis_port=$(free_port)
redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
for _ in $(seq 1 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
export PRACTICEGW_REDIS="redis://127.0.0.1:$redis_port/0"

# The same Caddyfile, without the limiter.
grep -v 'practicegw_ratelimit' Caddyfile >"$work/unlimited.Caddyfile"

start() { # name caddyfile -> sets port_<name>
	local port admin
	port=$(free_port); admin=$(free_port)
	PRACTICEGW_LISTEN=127.0.0.1:$port PRACTICEGW_ADMIN=127.0.0.1:$admin PRACTICEGW_DATA=$work/data-$1 \
		"$work/practicegw" run --config "$2" --adapter caddyfile >"$work/$1.log" 2>&1 &
	pids+=($!)
	wait_http "http://127.0.0.1:$port/v1/openapi.json"
	eval "port_$1=$port admin_$1=$admin"
}
start limited Caddyfile
start unlimited "$work/unlimited.Caddyfile"

# One credential (in Redis, so both gateways know it) with a ceiling far
# above what the run can reach, so every request is admitted and pays the
# full cost of the Redis round trip.
token=$(PRACTICEGW_ADMIN=127.0.0.1:$admin_limited "$work/practicegw" credential issue --firm frm_acme --name bench \
	--scopes jobs:read --rate-limit 1000000/s --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
curl -fs -D - -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$port_limited/v1/jobs?limit=50" | grep -qi '^ratelimit-policy' \
	|| { echo "the limited gateway sends no RateLimit-Policy" >&2; exit 1; }

run_wrk() { # name port -> prints "rps p50_ms p99_ms"
	local out
	out=$(wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -H "Authorization: Bearer $token" "http://127.0.0.1:$2/v1/jobs?limit=50")
	local non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
	[ -z "$non2xx" ] || { echo "$1: $non2xx non-2xx answers" >&2; exit 1; }
	echo "$out" | python3 -c '
import re, sys
text = sys.stdin.read()
def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s)", v)
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
p50 = ms(re.search(r"^\s*50%\s+(\S+)", text, re.M).group(1))
p99 = ms(re.search(r"^\s*99%\s+(\S+)", text, re.M).group(1))
print(rps, p50, p99)'
}

echo "GET /v1/jobs?limit=50, wrk -t2 -c$CONNS -d${DURATION}s, $(nproc) cores, redis-server on loopback"
for name in unlimited limited; do
	eval "p=\$port_$name"
	wrk -t2 -c"$CONNS" -d2s -H "Authorization: Bearer $token" "http://127.0.0.1:$p/v1/jobs?limit=50" >/dev/null
done
read -r u_rps u_p50 u_p99 < <(run_wrk unlimited "$port_unlimited")
read -r l_rps l_p50 l_p99 < <(run_wrk limited "$port_limited")
python3 - "$u_rps" "$u_p50" "$u_p99" "$l_rps" "$l_p50" "$l_p99" <<'PY'
import sys
u_rps, u_p50, u_p99, l_rps, l_p50, l_p99 = map(float, sys.argv[1:])
print(f"{'no limiter':<26} {u_rps:10.0f} req/s   p50 {u_p50:6.2f} ms   p99 {u_p99:6.2f} ms")
print(f"{'Redis limiter':<26} {l_rps:10.0f} req/s   p50 {l_p50:6.2f} ms   p99 {l_p99:6.2f} ms")
print(f"throughput cost {100*(1-l_rps/u_rps):5.1f}% (target <= 10%), p99 cost {l_p99-u_p99:+.2f} ms (target <= 1 ms)")
PY
