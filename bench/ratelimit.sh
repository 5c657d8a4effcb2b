#!/usr/bin/env bash
# Measures what the Redis rate limiter costs: GET /v1/jobs?limit=50 through
# the full gateway with practicegw_ratelimit on Redis, against the same
# gateway and route with the limiter removed from the Caddyfile, in one run,
# with the same load generator. Prints requests per second, p50, p99 and the
# differences. Target: at most 10% of throughput and 1 ms at p99.
#
#   bench/ratelimit.sh [duration-seconds] [connections] [rounds]
#
# CADDYFILE names another Caddyfile to measure (default: the root one),
# such as one that sets the limiter's batch_interval.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
CONNS=${2:-32}
ROUNDS=${3:-3}
CADDYFILE=${CADDYFILE:-Caddyfile}
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
pid_redis=$!
for _ in $(seq 1 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
export PRACTICEGW_REDIS="redis://127.0.0.1:$redis_port/0"

# The same Caddyfile, without the limiter's directive and its block.
awk '/^[ \t]*practicegw_ratelimit/ { skip = /\{[ \t]*$/; next } skip && /^[ \t]*\}/ { skip = 0; next } !skip' \
	"$CADDYFILE" >"$work/unlimited.Caddyfile"
if grep -q practicegw_ratelimit "$work/unlimited.Caddyfile"; then echo "could not remove the limiter from $CADDYFILE" >&2; exit 1; fi

start() { # name caddyfile -> sets port_<name>
	local port admin pid
	port=$(free_port); admin=$(free_port)
	PRACTICEGW_LISTEN=127.0.0.1:$port PRACTICEGW_ADMIN=127.0.0.1:$admin PRACTICEGW_DATA=$work/data-$1 \
		"$work/practicegw" run --config "$2" --adapter caddyfile >"$work/$1.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	wait_http "http://127.0.0.1:$port/v1/openapi.json"
	eval "port_$1=$port admin_$1=$admin pid_$1=$pid"
}
start limited "$CADDYFILE"
start unlimited "$work/unlimited.Caddyfile"

# One credential (in Redis, so both gateways know it) with a ceiling far
# above what the run can reach, so every request is admitted and pays the
# full cost of the Redis round trip.
token=$(PRACTICEGW_ADMIN=127.0.0.1:$admin_limited "$work/practicegw" credential issue --firm frm_acme --name bench \
	--scopes jobs:read --rate-limit 1000000/s --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
curl -fs -D - -o /dev/null -H "Authorization: Bearer $token" "http://127.0.0.1:$port_limited/v1/jobs?limit=50" | grep -qi '^ratelimit-policy' \
	|| { echo "the limited gateway sends no RateLimit-Policy" >&2; exit 1; }

# cpu_ticks pid...: CPU time (user + system, in clock ticks) the processes
# have used so far.
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }

run_wrk() { # name port pid -> prints "rps p50_ms p99_ms gateway_us_per_req redis_us_per_req"
	local out g0 r0 g1 r1
	g0=$(cpu_ticks "$3"); r0=$(cpu_ticks "$pid_redis")
	out=$(wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -H "Authorization: Bearer $token" "http://127.0.0.1:$2/v1/jobs?limit=50")
	g1=$(cpu_ticks "$3"); r1=$(cpu_ticks "$pid_redis")
	local non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
	[ -z "$non2xx" ] || { echo "$1: $non2xx non-2xx answers" >&2; exit 1; }
	echo "$out" | python3 -c '
import os, re, sys
text = sys.stdin.read()
hz = os.sysconf("SC_CLK_TCK")
gateway_ticks, redis_ticks = int(sys.argv[1]), int(sys.argv[2])
def ms(v):
    m = re.match(r"([\d.]+)(us|ms|s)", v)
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))
p50 = ms(re.search(r"^\s*50%\s+(\S+)", text, re.M).group(1))
p99 = ms(re.search(r"^\s*99%\s+(\S+)", text, re.M).group(1))
n = int(re.search(r"(\d+) requests in", text).group(1))
print(rps, p50, p99, gateway_ticks / hz / n * 1e6, redis_ticks / hz / n * 1e6)' "$((g1 - g0))" "$((r1 - r0))"
}

echo "GET /v1/jobs?limit=50, wrk -t2 -c$CONNS, $ROUNDS rounds of ${DURATION}s each way, alternating, $(nproc) cores, redis-server on loopback"
for name in unlimited limited; do
	eval "p=\$port_$name"
	wrk -t2 -c"$CONNS" -d2s -H "Authorization: Bearer $token" "http://127.0.0.1:$p/v1/jobs?limit=50" >/dev/null
done
# Alternating rounds, so that both see the same machine: a slow spell
# lands on both rather than on one.
for round in $(seq 1 "$ROUNDS"); do
	echo "unlimited $(run_wrk unlimited "$port_unlimited" "$pid_unlimited")" >>"$work/rounds"
	echo "limited $(run_wrk limited "$port_limited" "$pid_limited")" >>"$work/rounds"
done
python3 - "$work/rounds" <<'PY'
import statistics, sys
rows = {"unlimited": [], "limited": []}
for line in open(sys.argv[1]):
    name, *vals = line.split()
    rows[name].append(list(map(float, vals)))
def summary(rs):
    # Throughput and CPU are means over the rounds; latencies the median.
    return (statistics.mean(r[0] for r in rs), statistics.median(r[1] for r in rs),
            statistics.median(r[2] for r in rs), statistics.mean(r[3] for r in rs), statistics.mean(r[4] for r in rs))
u, l = summary(rows["unlimited"]), summary(rows["limited"])
costs = [100 * (1 - lr[0] / ur[0]) for ur, lr in zip(rows["unlimited"], rows["limited"])]
print(f"{'':<14} {'req/s':>10} {'p50':>9} {'p99':>9}   CPU per request: gateway, redis-server")
print(f"{'no limiter':<14} {u[0]:10.0f} {u[1]:6.2f} ms {u[2]:6.2f} ms   {u[3]:5.1f} us, {u[4]:4.1f} us")
print(f"{'Redis limiter':<14} {l[0]:10.0f} {l[1]:6.2f} ms {l[2]:6.2f} ms   {l[3]:5.1f} us, {l[4]:4.1f} us")
print(f"throughput cost {100*(1-l[0]/u[0]):5.1f}% (rounds: {', '.join(f'{c:.1f}%' for c in costs)}; target <= 10%), "
      f"p99 cost {l[2]-u[2]:+.2f} ms (target <= 1 ms)")
PY
