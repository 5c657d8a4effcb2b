#!/usr/bin/env bash
# Measures the full /v1 path (auth, scope check, adapter, JSON) against
# Caddy's own static_response serving the identical bytes, in one run, with
# the same load generator, and prints requests per second, p50, p99 and the
# throughput ratio. Target: ratio >= 0.75.
#
#   bench/gateway-vs-static.sh [duration-seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10}
CONNS=${2:-32}
command -v wrk >/dev/null || { echo "wrk is needed: apt-get install wrk" >&2; exit 1; }

work=$(mktemp -d)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_http() { for _ in $(seq 1 300); do curl -fs -o /dev/null "$1" && return 0; sleep 0.1; done; echo "no answer from $1" >&2; exit 1; }

go build -o "$work/practicegw" ./cmd/practicegw

gw_port=$(free_port); gw_admin=$(free_port)
PRACTICEGW_LISTEN=127.0.0.1:$gw_port PRACTICEGW_ADMIN=127.0.0.1:$gw_admin PRACTICEGW_DATA=$work/data \
	"$work/practicegw" run --config Caddyfile >"$work/gateway.log" 2>&1 &
pids+=($!)
wait_http "http://127.0.0.1:$gw_port/v1/openapi.json"
token=$(PRACTICEGW_ADMIN=127.0.0.1:$gw_admin "$work/practicegw" credential issue --firm frm_acme --name bench \
	--scopes jobs:read --rate-limit 1000000/s --json | python3 -c 'import json,sys; print(json.load(sys.stdin)["token"])')
url="http://127.0.0.1:$gw_port/v1/jobs?limit=50"
curl -fs -H "Authorization: Bearer $token" "$url" -o "$work/body.json"

# The baseline: the same bytes, same content type, from static_response.
st_port=$(free_port); st_admin=$(free_port)
python3 - "$work/body.json" "$st_port" "$st_admin" >"$work/static.json" <<'PY'
import json, sys
body = open(sys.argv[1]).read()
# The same access log as the gateway's Caddyfile, so both pay for it.
print(json.dumps({
  "admin": {"listen": "127.0.0.1:" + sys.argv[3]},
  "logging": {"logs": {"default": {"exclude": ["http.log.access.log0"]},
    "log0": {"writer": {"output": "stderr"}, "encoder": {"format": "json"}, "include": ["http.log.access.log0"]}}},
  "apps": {"http": {"servers": {"static": {"listen": ["127.0.0.1:" + sys.argv[2]], "logs": {"default_logger_name": "log0"}, "routes": [{"handle": [
    {"handler": "static_response", "status_code": 200, "body": body,
     "headers": {"Content-Type": ["application/json"]}}]}]}}}}
}))
PY
"$work/practicegw" run --config "$work/static.json" >"$work/static.log" 2>&1 &
pids+=($!)
static_url="http://127.0.0.1:$st_port/v1/jobs?limit=50"
wait_http "$static_url"
cmp -s <(curl -fs "$static_url") "$work/body.json" || { echo "baseline body differs" >&2; exit 1; }

run_wrk() { # name url [header]
	local out
	if [ -n "${3:-}" ]; then
		out=$(wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency -H "$3" "$2")
	else
		out=$(wrk -t2 -c"$CONNS" -d"${DURATION}s" --latency "$2")
	fi
	local non2xx=$(echo "$out" | awk '/Non-2xx/ {print $NF}')
	[ -z "$non2xx" ] || { echo "$1: $non2xx non-2xx answers" >&2; echo "$out" >&2; exit 1; }
	local rps=$(echo "$out" | awk '/Requests\/sec/ {print $2}')
	local p50=$(echo "$out" | awk '$1=="50%" {print $2}')
	local p99=$(echo "$out" | awk '$1=="99%" {print $2}')
	printf '%-28s %12s req/s   p50 %8s   p99 %8s\n' "$1" "$rps" "$p50" "$p99" >&2
	echo "$rps"
}

echo "GET /v1/jobs?limit=50 ($(wc -c <"$work/body.json") bytes), wrk -t2 -c$CONNS -d${DURATION}s, $(nproc) cores" >&2
wrk -t2 -c"$CONNS" -d2s "$static_url" >/dev/null
wrk -t2 -c"$CONNS" -d2s -H "Authorization: Bearer $token" "$url" >/dev/null
static_rps=$(run_wrk "static_response (baseline)" "$static_url")
gw_rps=$(run_wrk "practicegw full path" "$url" "Authorization: Bearer $token")
python3 -c "print('ratio practicegw/static: %.3f (target >= 0.75)' % ($gw_rps/$static_rps))" >&2
