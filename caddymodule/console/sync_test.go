package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/credential"
	"github.com/practicegw/practicegw/store/usage"
)

// consoleRig is a console handler over a real engine and credential
// registry on an embedded store, with the app's firms and syncs given by
// the test, and a signed-in administrator of frm_acme.
type consoleRig struct {
	h      *Handler
	syncs  *fakeSyncs
	cookie *http.Cookie
	csrf   string
}

var rigNow = time.Date(2026, 3, 2, 10, 0, 0, 0, time.UTC)

func newConsoleRig(t *testing.T, firm string, statuses []readmodel.Status) *consoleRig {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "state.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	secrets, _ := sealed.Random()
	st, err := bolt.New(db, nil, bolt.WithSecrets(secrets))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := dispatcher.New(dispatcher.Config{}, st.Backends())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	ring, err := auth.NewKeyring(credential.SigningKey{ID: "k1", Secret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	reg := auth.NewRegistry(st, ring, auth.RegistryConfig{FlushEvery: time.Hour})
	t.Cleanup(func() { reg.Close() })
	admin, _, err := reg.Issue(context.Background(), auth.IssueRequest{Firm: firm, Name: "Ops", Scopes: []string{"admin"}})
	if err != nil {
		t.Fatal(err)
	}
	sg, err := newSigner()
	if err != nil {
		t.Fatal(err)
	}
	syncs := &fakeSyncs{statuses: map[string][]readmodel.Status{firm: statuses}}
	h := &Handler{
		firms: oneFirm(firm), syncs: syncs, usage: noLimiter{}, registry: reg,
		endpoints: eng, deliveries: eng, replays: eng, exports: eng,
		logger: zap.NewNop(), now: func() time.Time { return rigNow },
		sessions: &sessions{signer: sg, byID: map[string]*sessionState{}},
	}
	if h.views, err = loadViews(h.now); err != nil {
		t.Fatal(err)
	}
	h.mux = h.routes()
	sess := h.sessions.start(admin.ID, firm, rigNow.Add(time.Hour))
	return &consoleRig{h: h, syncs: syncs, csrf: h.sessions.csrf(sess.ID),
		cookie: &http.Cookie{Name: sessionCookie, Value: h.sessions.encode(sess)}}
}

func (rg *consoleRig) do(t *testing.T, method, path string, form url.Values) *httptest.ResponseRecorder {
	t.Helper()
	var req *http.Request
	if form != nil {
		req = httptest.NewRequest(method, path, strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	} else {
		req = httptest.NewRequest(method, path, nil)
	}
	req.AddCookie(rg.cookie)
	w := httptest.NewRecorder()
	if err := rg.h.ServeHTTP(w, req, nil); err != nil {
		t.Fatal(err)
	}
	return w
}

type oneFirm string

func (f oneFirm) FirmName(id string) (string, bool) {
	return "Acme & Co", id == string(f)
}

// noLimiter is a gateway whose routes no rate limiter serves.
type noLimiter struct{}

func (noLimiter) Traffic(context.Context, *credential.Credential, time.Time) (usage.Traffic, bool, error) {
	return usage.Traffic{}, false, nil
}

// fakeSyncs stands for the app's syncs: statuses as given, resyncs
// recorded.
type fakeSyncs struct {
	statuses map[string][]readmodel.Status
	mu       sync.Mutex
	resynced []string
}

func (f *fakeSyncs) SyncStatus(firm string) []readmodel.Status { return f.statuses[firm] }

func (f *fakeSyncs) Resync(_ context.Context, firm, system string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.resynced = append(f.resynced, firm+"/"+system)
	return nil
}

func (f *fakeSyncs) asked() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.resynced...)
}

func acmeSyncs() []readmodel.Status {
	return []readmodel.Status{
		{Firm: "frm_acme", Role: "records", System: "karbon", Label: "Karbon", State: readmodel.StateBackfilling,
			CallsLastHour: 1234, BudgetPerHour: 3600,
			Kinds: []readmodel.KindStatus{
				{Kind: practice.Clients, Backfilled: true, Seen: 120, About: 120, Records: 120, ConfirmedAt: rigNow.Add(-time.Minute)},
				{Kind: practice.Jobs, Seen: 3200, About: 5000, Records: 3200},
			}},
		{Firm: "frm_acme", Role: "ledger", System: "xero", Label: "Xero", State: readmodel.StateFailing,
			Why: "xero answered 401 Unauthorized: the connection was revoked", ConfirmedAt: rigNow.Add(-3 * time.Hour),
			CallsLastHour: 12, Kinds: []readmodel.KindStatus{{Kind: practice.Invoices, Backfilled: true, Records: 7,
				ConfirmedAt: rigNow.Add(-3 * time.Hour)}},
			Plan: readmodel.Plan{PollEvery: map[string]time.Duration{"invoices": 270 * time.Second},
				CallsPerPeriod: 1100, Limit: 5000, Period: 24 * time.Hour, Share: 0.25}},
	}
}

// section is the overview's sync panel, or "" when it has none.
func section(body string) string {
	i := strings.Index(body, `id="sync"`)
	if i < 0 {
		return ""
	}
	rest := body[i:]
	return rest[:strings.Index(rest, "</section>")]
}

func TestOverviewShowsEachRealSystemsSync(t *testing.T) {
	rg := newConsoleRig(t, "frm_acme", acmeSyncs())
	w := rg.do(t, "GET", "/console", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("overview: %d %s", w.Code, w.Body)
	}
	sec := section(w.Body.String())
	if sec == "" {
		t.Fatal("the overview has no sync section for a firm with real systems")
	}
	for _, want := range []string{
		`data-system="records"`, `data-state="backfilling"`,
		"Karbon jobs: 3,200 of about 5,000",
		"<strong>1,234</strong> of 3,600",
		`data-kind="jobs">jobs: 3,200 <span class="muted">(backfilling)</span>`,
		`data-kind="clients">clients: 120</li>`,
		`data-system="ledger"`, `data-state="failing"`,
		"Xero refused the gateway&#39;s access; the sync tries again, and the connection may need reconnecting.",
		"3 hours old",
		"<strong>12</strong> <span class=\"muted small\">(no published budget)</span>",
		`data-plan>polls every 4m30s: about 1,100 of 5,000 calls a day, at most 1,250 for this sync</p>`,
		`action="/console/sync/records/resync"`, `action="/console/sync/ledger/resync"`,
		`name="csrf" value="` + rg.csrf + `"`,
	} {
		if !strings.Contains(sec, want) {
			t.Errorf("the sync section lacks %q:\n%s", want, sec)
		}
	}
	if strings.Contains(sec, "401 Unauthorized") || strings.Contains(sec, "Details") {
		t.Error("the sync section shows the error chain, not the sentence")
	}
	if strings.Contains(sec, "karbon clients") {
		t.Error("a backfilled kind is still shown as in progress")
	}
}

func TestOverviewOfAFirmOnDemoRecordsShowsNoSync(t *testing.T) {
	rg := newConsoleRig(t, "frm_acme", nil)
	w := rg.do(t, "GET", "/console", nil)
	if w.Code != http.StatusOK {
		t.Fatalf("overview: %d %s", w.Code, w.Body)
	}
	if sec := section(w.Body.String()); sec != "" || strings.Contains(w.Body.String(), "Resync now") {
		t.Fatalf("a firm on demo records shows a sync section:\n%s", sec)
	}
}

func TestResyncNowAsksTheSystemsSync(t *testing.T) {
	rg := newConsoleRig(t, "frm_acme", acmeSyncs())
	w := rg.do(t, "POST", "/console/sync/records/resync", url.Values{"csrf": {rg.csrf}})
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "/console#sync" {
		t.Fatalf("resync: %d to %q, want 303 to the overview's sync section", w.Code, w.Header().Get("Location"))
	}
	if got := rg.syncs.asked(); len(got) != 1 || got[0] != "frm_acme/records" {
		t.Fatalf("resyncs asked: %v", got)
	}
	page := rg.do(t, "GET", "/console", nil).Body.String()
	if !strings.Contains(page, "Resync of Karbon (records) asked for") {
		t.Error("the overview after a resync does not say it was asked for")
	}
}

func TestResyncIsRefusedWithoutTheSessionsToken(t *testing.T) {
	rg := newConsoleRig(t, "frm_acme", acmeSyncs())
	for name, tc := range map[string]struct {
		path   string
		form   url.Values
		origin string
		want   int
	}{
		"no token":          {"/console/sync/records/resync", url.Values{}, "", http.StatusForbidden},
		"another's token":   {"/console/sync/records/resync", url.Values{"csrf": {rg.h.sessions.csrf("other")}}, "", http.StatusForbidden},
		"another site":      {"/console/sync/records/resync", url.Values{"csrf": {rg.csrf}}, "https://evil.example", http.StatusForbidden},
		"no such system":    {"/console/sync/documents/resync", url.Values{"csrf": {rg.csrf}}, "", http.StatusNotFound},
		"a vendor's name":   {"/console/sync/karbon/resync", url.Values{"csrf": {rg.csrf}}, "", http.StatusNotFound},
		"asked with a link": {"/console/sync/records/resync", nil, "", http.StatusNotFound},
	} {
		method := "POST"
		if tc.form == nil {
			method = "GET"
		}
		req := httptest.NewRequest(method, tc.path, strings.NewReader(tc.form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if tc.origin != "" {
			req.Header.Set("Origin", tc.origin)
		}
		req.AddCookie(rg.cookie)
		w := httptest.NewRecorder()
		if err := rg.h.ServeHTTP(w, req, nil); err != nil {
			t.Fatal(err)
		}
		if w.Code != tc.want {
			t.Errorf("%s: %d, want %d", name, w.Code, tc.want)
		}
	}
	if got := rg.syncs.asked(); len(got) != 0 {
		t.Fatalf("refused posts resynced %v", got)
	}
	// Signed out, the post goes to the sign-in page and resyncs nothing.
	req := httptest.NewRequest("POST", "/console/sync/records/resync", strings.NewReader("csrf="+url.QueryEscape(rg.csrf)))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	w := httptest.NewRecorder()
	rg.h.ServeHTTP(w, req, nil)
	if w.Code != http.StatusSeeOther || !strings.HasPrefix(w.Header().Get("Location"), "/console/sign-in") || len(rg.syncs.asked()) != 0 {
		t.Fatalf("signed out: %d to %q, resyncs %v", w.Code, w.Header().Get("Location"), rg.syncs.asked())
	}
}
