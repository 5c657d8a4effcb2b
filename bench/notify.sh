#!/usr/bin/env bash
# From a change in a firm's real system to its webhook, through the real
# binary, with every vendor double notifying as its vendor documents
# (issue #45): Karbon coalescing a record's changes over 60 s, Intuit
# batching by the minute, Xero at once, Microsoft Graph's subscriptions,
# Google Drive's push channels and Dropbox's webhooks as the drive
# changes. Prints, per system and kind, a burst of 100 changes' time to
# the webhook from the change and from the vendor's notification (p50,
# p90, p99, max). Target: p99 from the notification under a second where
# the vendor's allowance lets the reads it needs be made in it.
#
#   bench/notify.sh [-bin PATH] [-burst 100] [-only karbon,xero,...] [-before]
#
# -before measures a binary built before the document stores' notifications
# (its Caddyfile names no notification_url or app_secret).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ " $* " != *" -bin "* ]]; then
	go build -o /tmp/practicegw-bench-notify ./cmd/practicegw
	set -- -bin /tmp/practicegw-bench-notify "$@"
fi
exec go run ./bench/notify "$@"
