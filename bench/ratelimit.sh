#!/usr/bin/env bash
# Measures what the Redis rate limiter costs: GET /v1/jobs?limit=50 through
# the full gateway with practicegw_ratelimit on Redis, against the same
# gateway and route with the limiter removed from the Caddyfile, in one run,
# with the same load generator. Prints requests per second, p50, p99 and the
# differences. Target: at most 10% of throughput and 1 ms at p99.
#
# A third gateway runs the same limiter without Redis (the embedded
# default, deciding in process), which splits the cost in two: what
# limiting costs, and what asking Redis adds.
#
#   bench/ratelimit.sh [duration-seconds] [connections] [rounds]
#
# CADDYFILE names another Caddyfile to measure (default: the root one),
# such as one that sets the limiter's batch_interval. PIN=1 gives the
# gateways core 0 and wrk and redis-server the other cores, so that the
# gateway under test does not share its core with the load or with Redis.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
CONNS=${2:-32}
ROUNDS=${3:-3}
CADDYFILE=${CADDYFILE:-Caddyfile}
gateway_cpus=() others_cpus=()
if [ "${PIN:-}" = 1 ]; then
	[ "$(nproc)" -ge 2 ] || { echo "PIN=1 needs at least 2 cores" >&2; exit 1; }
	gateway_cpus=(taskset -c 0) others_cpus=(taskset -c "1-$(($(nproc) - 1))")
fi
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
${others_cpus[@]+"${others_cpus[@]}"} redis-server --port "$redis_port" --bind 127.0.0.1 --save "" --appendonly no --dir "$work" >"$work/redis.log" 2>&1 &
pids+=($!)
pid_redis=$!
for _ in $(seq 1 50); do redis-cli -p "$redis_port" ping >/dev/null 2>&1 && break; sleep 0.1; done
export PRACTICEGW_REDIS="redis://127.0.0.1:$redis_port/0"
# Gateways sharing Redis share the key their secrets are sealed under.
PRACTICEGW_SECRETS_KEY=$(head -c 32 /dev/urandom | base64)
export PRACTICEGW_SECRETS_KEY

# The same Caddyfile, without the limiter's directive and its block.
awk '/^[ \t]*practicegw_ratelimit/ { skip = /\{[ \t]*$/; next } skip && /^[ \t]*\}/ { skip = 0; next } !skip' \
	"$CADDYFILE" >"$work/unlimited.Caddyfile"
if grep -q practicegw_ratelimit "$work/unlimited.Caddyfile"; then echo "could not remove the limiter from $CADDYFILE" >&2; exit 1; fi

start() { # name caddyfile [redis-url] -> sets port_<name>
	local port admin pid
	port=$(free_port); admin=$(free_port)
	PRACTICEGW_REDIS=${3-$PRACTICEGW_REDIS} PRACTICEGW_LISTEN=127.0.0.1:$port PRACTICEGW_ADMIN=127.0.0.1:$admin PRACTICEGW_DATA=$work/data-$1 \
		${gateway_cpus[@]+"${gateway_cpus[@]}"} "$work/practicegw" run --config "$2" --adapter caddyfile >"$work/$1.log" 2>&1 &
	pid=$!
	pids+=("$pid")
	wait_http "http://127.0.0.1:$port/v1/openapi.json"
	eval "port_$1=$port admin_$1=$admin pid_$1=$pid"
}
start limited "$CADDYFILE"
start unlimited "$work/unlimited.Caddyfile"
start embedded "$CADDYFILE" ""

# One credential (in Redis, so both Redis gateways know it) with a ceiling far
# above what the run can reach, so every request is admitted and pays the
# full cost of the Redis round trip. The embedded gateway keeps its own
# credentials, so it gets a credential of its own.
issue() { # admin-port
	PRACTICEGW_ADMIN=127.0.0.1:$1 "$work/practicegw" credential issue --firm frm_acme --name bench \
		--scopes jobs:read --rate-limit 1000000/s --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])'
}
token_limited=$(issue "$admin_limited")
token_unlimited=$token_limited token_embedded=$(issue "$admin_embedded")
for name in limited embedded; do
	eval "p=\$port_$name t=\$token_$name"
	curl -fs -D - -o /dev/null -H "Authorization: Bearer $t" "http://127.0.0.1:$p/v1/jobs?limit=50" | grep -qi '^ratelimit-policy' \
		|| { echo "the $name gateway sends no RateLimit-Policy" >&2; exit 1; }
done

# cpu_ticks pid...: CPU time (user + system, in clock ticks) the processes
# have used so far.
cpu_ticks() { local t=0 p; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo "$t"; }

run_wrk() { # name port pid token -> prints "rps p50_ms p99_ms gateway_us_per_req redis_us_per_req"
	local out g0 r0 g1 r1
	g0=$(cpu_ticks "$3"); r0=$(cpu_ticks "$pid_redis")
	out=$(${others_cpus[@]+"${others_cpus[@]}"} wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -H "Authorization: Bearer $4" "http://127.0.0.1:$2/v1/jobs?limit=50")
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

echo "GET /v1/jobs?limit=50, wrk -t2 -c$CONNS, $ROUNDS rounds of ${DURATION}s each way, alternating, $(nproc) cores${PIN:+ (gateways pinned to core 0)}, redis-server on loopback"
names="unlimited embedded limited"
for name in $names; do
	eval "p=\$port_$name t=\$token_$name"
	wrk -t2 -c"$CONNS" -d2s -H "Authorization: Bearer $t" "http://127.0.0.1:$p/v1/jobs?limit=50" >/dev/null
done
# Alternating rounds, so that all three see the same machine: a slow spell
# lands on each rather than on one.
for round in $(seq 1 "$ROUNDS"); do
	for name in $names; do
		eval "p=\$port_$name pid=\$pid_$name t=\$token_$name"
		echo "$name $(run_wrk "$name" "$p" "$pid" "$t")" >>"$work/rounds"
	done
done
python3 - "$work/rounds" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, *vals = line.split()
    rows.setdefault(name, []).append(list(map(float, vals)))
def summary(rs):
    # Throughput and CPU are means over the rounds; latencies the median.
    return (statistics.mean(r[0] for r in rs), statistics.median(r[1] for r in rs),
            statistics.median(r[2] for r in rs), statistics.mean(r[3] for r in rs), statistics.mean(r[4] for r in rs))
base, l = summary(rows["unlimited"]), summary(rows["limited"])
print(f"{'':<16} {'req/s':>10} {'p50':>9} {'p99':>9}   CPU per request: gateway, redis-server")
for name, label in (("unlimited", "no limiter"), ("embedded", "in-process"), ("limited", "Redis limiter")):
    r = summary(rows[name])
    print(f"{label:<16} {r[0]:10.0f} {r[1]:6.2f} ms {r[2]:6.2f} ms   {r[3]:5.1f} us, {r[4]:4.1f} us")
def cost(name):
    return 100 * (1 - summary(rows[name])[0] / base[0]), [100 * (1 - r[0] / u[0]) for u, r in zip(rows["unlimited"], rows[name])]
c, rounds = cost("embedded")
print(f"in-process limiter: throughput cost {c:5.1f}% (rounds: {', '.join(f'{x:.1f}%' for x in rounds)})")
c, rounds = cost("limited")
print(f"Redis limiter: throughput cost {c:5.1f}% (rounds: {', '.join(f'{x:.1f}%' for x in rounds)}; target <= 10%), "
      f"p99 cost {l[2]-base[2]:+.2f} ms (target <= 1 ms)")
PY
