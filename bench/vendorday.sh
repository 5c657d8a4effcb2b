#!/usr/bin/env bash
# A day of vendor calls (issue #23): the read model's syncs with the
# default configuration run for 24 hours of a fake clock over the vendor
# doubles, for a small and a large firm on Karbon + Xero + SharePoint, on
# Karbon with its billing as the ledger + SharePoint and on Xero Practice
# Manager + SharePoint (the Xero and XPM firms with their quotes as
# engagements), and print each vendor's calls in
# the day against its published daily allowance and its busiest minute
# against its per-minute limit. Targets: at most 50% of each daily
# allowance, no minute over its limit. A QuickBooks Online company is run
# alone, idle and at 200 changes an hour (told by webhooks): target at most
# 1,000 calls a day idle, never over 500 a minute or 10 a second. See
# bench/vendorday.
#
#   bench/vendorday.sh [-short]     -short: the small firms alone
set -euo pipefail
cd "$(dirname "$0")/.."
export PRACTICEGW_BENCH_VENDORDAY=1
exec go test -count=1 -timeout 60m -run "TestADayOfVendorCalls|TestADayOfQuickBooksCalls" -v "$@" ./bench/vendorday
