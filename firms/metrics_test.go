package firms

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

// fixedSyncs is an app whose syncs and connections report what the test
// says.
type fixedSyncs struct {
	statuses []readmodel.Status
	conns    []connection.Connection
}

func (f *fixedSyncs) allSyncStatus() []readmodel.Status       { return f.statuses }
func (f *fixedSyncs) allConnections() []connection.Connection { return f.conns }

// practicegw_connections says each firm role's newest connection's status,
// with no label that could carry a secret or the vendor's words.
func TestConnectionMetricsSayEachStatus(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	c, err := registerSyncCollector(reg)
	if err != nil {
		t.Fatal(err)
	}
	const reason = "refresh refused: invalid_grant rt_5ecret"
	c.serve(&fixedSyncs{conns: []connection.Connection{
		{ID: "con_old", Firm: "frm_acme", Role: "ledger", System: "xero", Status: connection.Disconnected},
		{ID: "con_new", Firm: "frm_acme", Role: "ledger", System: "xero", Status: connection.NeedsReconnect, Reason: reason, OrganisationID: "tenant-1"},
		{ID: "con_k", Firm: "frm_acme", Role: "records", System: "karbon", Status: connection.Connected},
	}})
	var want strings.Builder
	want.WriteString("# HELP practicegw_connections Each firm's connection of each role: 1 for its current status, 0 for the others.\n# TYPE practicegw_connections gauge\n")
	for _, sys := range []struct{ role, system, status string }{{"ledger", "xero", "needs_reconnect"}, {"records", "karbon", "connected"}} {
		for _, st := range []string{"choose_tenant", "connected", "disconnected", "needs_reconnect", "pending"} {
			v := 0
			if st == sys.status {
				v = 1
			}
			fmt.Fprintf(&want, "practicegw_connections{firm=\"frm_acme\",role=%q,status=%q,system=%q} %d\n", sys.role, st, sys.system, v)
		}
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want.String()), "practicegw_connections"); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				for _, secret := range []string{"rt_5ecret", "tenant-1", "con_new"} {
					if strings.Contains(l.GetValue(), secret) {
						t.Errorf("%s has %s=%q", f.GetName(), l.GetName(), l.GetValue())
					}
				}
			}
		}
	}
}

func TestSyncMetricsReportEachSystemAtScrapeTime(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	reg := prometheus.NewPedanticRegistry()
	c, err := registerSyncCollector(reg)
	if err != nil {
		t.Fatal(err)
	}
	c.now = func() time.Time { return now }
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("before any app serves: %d series, %v", n, err)
	}
	c.serve(&fixedSyncs{statuses: []readmodel.Status{
		{Firm: "frm_acme", Role: "records", System: "karbon", Label: "Karbon", State: readmodel.StateBackfilling,
			CallsLastHour: 1234, BudgetPerHour: 3600, Kinds: []readmodel.KindStatus{
				{Kind: practice.Clients, Backfilled: true, Seen: 120, About: 120, Records: 120},
				{Kind: practice.Jobs, Seen: 3200, About: 5000, Records: 3200},
			}},
		{Firm: "frm_acme", Role: "ledger", System: "xero", Label: "Xero", State: readmodel.StateFailing, Why: "401",
			ConfirmedAt: now.Add(-90 * time.Second), CallsLastHour: 12,
			Kinds: []readmodel.KindStatus{{Kind: practice.Invoices, Backfilled: true, Seen: 7, Records: 7}}},
	}})
	want := `
# HELP practicegw_sync_backfill_about Records the last full pass over each kind found, what the current one is measured against; absent before the first ends.
# TYPE practicegw_sync_backfill_about gauge
practicegw_sync_backfill_about{firm="frm_acme",kind="clients",system="records"} 120
practicegw_sync_backfill_about{firm="frm_acme",kind="jobs",system="records"} 5000
# HELP practicegw_sync_backfill_seen Records the current full pass over each kind of each firm system has read.
# TYPE practicegw_sync_backfill_seen gauge
practicegw_sync_backfill_seen{firm="frm_acme",kind="clients",system="records"} 120
practicegw_sync_backfill_seen{firm="frm_acme",kind="invoices",system="ledger"} 7
practicegw_sync_backfill_seen{firm="frm_acme",kind="jobs",system="records"} 3200
# HELP practicegw_sync_data_age_seconds Age of the oldest kind's data in each firm system's read model; absent until every kind is backfilled.
# TYPE practicegw_sync_data_age_seconds gauge
practicegw_sync_data_age_seconds{firm="frm_acme",system="ledger"} 90
# HELP practicegw_sync_records Records of each kind in this instance's read model of each firm system.
# TYPE practicegw_sync_records gauge
practicegw_sync_records{firm="frm_acme",kind="clients",system="records"} 120
practicegw_sync_records{firm="frm_acme",kind="invoices",system="ledger"} 7
practicegw_sync_records{firm="frm_acme",kind="jobs",system="records"} 3200
# HELP practicegw_sync_state Sync of each firm system with the read model: 1 for its current state, 0 for the others.
# TYPE practicegw_sync_state gauge
practicegw_sync_state{firm="frm_acme",state="backfilling",system="ledger"} 0
practicegw_sync_state{firm="frm_acme",state="backfilling",system="records"} 1
practicegw_sync_state{firm="frm_acme",state="failing",system="ledger"} 1
practicegw_sync_state{firm="frm_acme",state="failing",system="records"} 0
practicegw_sync_state{firm="frm_acme",state="lagging",system="ledger"} 0
practicegw_sync_state{firm="frm_acme",state="lagging",system="records"} 0
practicegw_sync_state{firm="frm_acme",state="live",system="ledger"} 0
practicegw_sync_state{firm="frm_acme",state="live",system="records"} 0
# HELP practicegw_sync_vendor_budget_per_hour The vendor's published hourly limit for each firm system; absent when unknown.
# TYPE practicegw_sync_vendor_budget_per_hour gauge
practicegw_sync_vendor_budget_per_hour{firm="frm_acme",system="records"} 3600
# HELP practicegw_sync_vendor_calls_last_hour Calls to each firm system's vendor in the last hour by the instance that runs its sync.
# TYPE practicegw_sync_vendor_calls_last_hour gauge
practicegw_sync_vendor_calls_last_hour{firm="frm_acme",system="ledger"} 12
practicegw_sync_vendor_calls_last_hour{firm="frm_acme",system="records"} 1234
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// A reload provisions a new app before the old one stops: the new one
// takes the collector over, and the old one stopping leaves it be.
func TestSyncMetricsFollowTheNewestApp(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	first, err := registerSyncCollector(reg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := registerSyncCollector(reg)
	if err != nil {
		t.Fatal(err)
	}
	if first != second {
		t.Fatal("a second app on the same registry made a second collector")
	}
	old := &fixedSyncs{statuses: []readmodel.Status{{Firm: "frm_old", Role: "records", State: readmodel.StateLive}}}
	current := &fixedSyncs{statuses: []readmodel.Status{{Firm: "frm_new", Role: "records", State: readmodel.StateLagging}}}
	first.serve(old)
	second.serve(current)
	first.retire(old)
	const q = "practicegw_sync_state"
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP practicegw_sync_state Sync of each firm system with the read model: 1 for its current state, 0 for the others.
# TYPE practicegw_sync_state gauge
practicegw_sync_state{firm="frm_new",state="backfilling",system="records"} 0
practicegw_sync_state{firm="frm_new",state="failing",system="records"} 0
practicegw_sync_state{firm="frm_new",state="lagging",system="records"} 1
practicegw_sync_state{firm="frm_new",state="live",system="records"} 0
`), q); err != nil {
		t.Fatal(err)
	}
	second.retire(current)
	if n, err := testutil.GatherAndCount(reg); err != nil || n != 0 {
		t.Fatalf("after the last app stopped: %d series, %v", n, err)
	}
}

// TestReadinessShowsSyncStatesNotTheVendorsWords: /readyz is public, so a
// sync shows its state and figures only; why it fails (the vendor's words,
// with paths, paging tokens and token URLs) reaches the log alone.
func TestReadinessShowsSyncStatesNotTheVendorsWords(t *testing.T) {
	now := time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)
	why := `GET /v3/Contacts?$skiptoken=c2VjcmV0: 400 {"error":"invalid_grant","token_url":"https://login.example/oauth2/token"}`
	cases := []struct {
		st   readmodel.Status
		want string
	}{
		{readmodel.Status{Firm: "frm_x", System: "karbon", State: readmodel.StateFailing, Why: why,
			ConfirmedAt: now.Add(-90 * time.Second)}, "failing; data confirmed 1m30s ago"},
		{readmodel.Status{Firm: "frm_x", System: "karbon", State: readmodel.StateFailing, Why: why}, "failing"},
		{readmodel.Status{Firm: "frm_x", System: "xero", State: readmodel.StateLagging, Why: "invoices not confirmed since 2026-03-02T09:00:00Z",
			ConfirmedAt: now.Add(-time.Hour)}, "lagging; data confirmed 1h0m0s ago"},
		{readmodel.Status{Firm: "frm_x", System: "karbon", Label: "Karbon", State: readmodel.StateBackfilling,
			Kinds: []readmodel.KindStatus{{Kind: practice.Jobs, Seen: 3200, About: 5000}}}, "backfilling: Karbon jobs: 3,200 of about 5,000"},
	}
	for _, c := range cases {
		got := syncCheck(c.st, now)
		if got.Detail != c.want || got.Name != "sync "+c.st.System+"/frm_x" {
			t.Errorf("%s %s: %q %q, want %q", c.st.System, c.st.State, got.Name, got.Detail, c.want)
		}
		if c.st.Why != "" && (got.Err == nil || got.Err.Error() != c.st.Why) {
			t.Errorf("%s: the reason is not kept for the log: %v", c.st.State, got.Err)
		}
	}
}
