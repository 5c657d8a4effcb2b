#!/usr/bin/env bash
# Measures /v1 reads served from the read model of a firm on real systems
# (Karbon, Xero and SharePoint doubles) against the same reads over demo
# records, in one gateway and one run, and the vendor calls made during
# the read load next to the sync's own over an idle window (issue #16).
# Targets: p99 within 1.5x of demo; no vendor call caused by reads. With
# -large, a firm of 50,000 work items, 10,000 clients and 30,000 invoices
# is backfilled too: its duration, vendor calls and peak calls a minute,
# and its page p99 next to the small firm's (target at most 1.2x).
#
#   bench/readmodel.sh [-duration 60s] [-rate 20] [-poll 15s] [-large]
#                      [-karbon-limit 6000/m] [-xero-limit 3000/m] [-profile FILE]
#
# The vendor budgets are raised above the published 120/m (Karbon) and
# 60/m (Xero) so that a backfill ends in minutes; the run prints the peak
# calls a minute observed and how long the backfill needs at the
# published limits. See bench/readmodel/main.go.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${TMPDIR:-/tmp}/practicegw-bench
go build -o "$bin" ./cmd/practicegw
go build -o "${TMPDIR:-/tmp}/practicegw-bench-readmodel" ./bench/readmodel
exec "${TMPDIR:-/tmp}/practicegw-bench-readmodel" -bin "$bin" "$@"
