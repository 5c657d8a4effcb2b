#!/usr/bin/env bash
# Installs what the test suite talks to: a real redis-server and headless
# Chromium, from Debian's packages. Fails (never skips) when they cannot be
# had, so CI cannot go green without them.
set -euo pipefail

need=()
command -v redis-server >/dev/null 2>&1 || need+=(redis-server)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v wrk >/dev/null 2>&1 || need+=(wrk)

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

for tool in redis-server chromium; do
	command -v "$tool" >/dev/null 2>&1 || { echo "$tool is still missing after installing" >&2; exit 1; }
done
