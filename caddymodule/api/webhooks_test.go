package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bbolt "go.etcd.io/bbolt"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/credential"
)

// webhookHandler serves the webhook routes from a real engine on an
// embedded store.
func webhookHandler(t *testing.T) (*Handler, *dispatcher.Engine) {
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
	eng, err := dispatcher.New(dispatcher.Config{AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}},
		st.Backends())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { eng.Close() })
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	h := &Handler{logger: zap.NewNop(), metrics: m, MaxBodyBytes: defaultMaxBody,
		tenants: webhooksOnly{}, events: eng, endpoints: eng, endpointsW: eng, secrets: eng, deliveries: eng,
		exports: eng, replays: eng}
	return h, eng
}

// webhooksOnly serves a gateway whose firms have no record systems: the
// webhook routes need none.
type webhooksOnly struct{}

func (webhooksOnly) Systems(practice.Tenant) (Systems, bool) { return nil, true }

func TestReplayToADisabledEndpointIsAConflict(t *testing.T) {
	h, eng := webhookHandler(t)
	ctx := context.Background()
	tenant := practice.Tenant{Firm: "frm_acme"}
	ep, _, err := eng.CreateEndpoint(ctx, tenant, dispatcher.EndpointInput{URL: "http://127.0.0.1:9/hook",
		Events: []string{"client.created"}})
	if err != nil {
		t.Fatal(err)
	}
	err = eng.Ingest(ctx, practice.Change{ID: "chg_1", Firm: tenant.Firm, Kind: practice.Clients,
		ResourceID: "cli_1", After: json.RawMessage(`{"id":"cli_1"}`), OccurredAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	page, err := eng.ListDeliveries(ctx, tenant, dispatcher.DeliveryQuery{EndpointID: ep.ID, Limit: 10})
	if err != nil || len(page.Deliveries) != 1 {
		t.Fatalf("deliveries: %v %v", page.Deliveries, err)
	}
	disabled := dispatcher.EndpointDisabled
	if _, err := eng.UpdateEndpoint(ctx, tenant, ep.ID, dispatcher.EndpointUpdate{Status: &disabled}); err != nil {
		t.Fatal(err)
	}

	cred := &credential.Credential{ID: "cred_1", Firm: tenant.Firm, Scopes: []string{"webhooks:write"}}
	for _, path := range []string{
		"/v1/deliveries/" + page.Deliveries[0].ID + "/replay",
		"/v1/webhook_endpoints/" + ep.ID + "/replay_failed",
	} {
		body := ""
		if strings.HasSuffix(path, "replay_failed") {
			body = `{"since":"2026-01-01T00:00:00Z"}`
		}
		r := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		r = r.WithContext(auth.WithCredential(r.Context(), cred))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r, nil)
		var got struct {
			Error struct{ Code, Message string }
		}
		if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil {
			t.Fatalf("%s: %d %s", path, w.Code, w.Body)
		}
		if w.Code != http.StatusConflict || got.Error.Code != "conflict" || !strings.Contains(got.Error.Message, "disabled") {
			t.Errorf("%s: %d %s, want 409 conflict naming the disabled endpoint", path, w.Code, w.Body)
		}
	}
}
