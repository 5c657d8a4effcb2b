package connect_test

import (
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/store/connection"
)

// An access key that cannot be one is refused on access_key before
// Karbon is asked; a key for a role already connected is refused as the
// role's conflict, whatever the key.
func TestAccessKeyRefusedBeforeKarbonIsAsked(t *testing.T) {
	h := newHarness(t)
	calls := func() int {
		h.v.mu.Lock()
		defer h.v.mu.Unlock()
		return len(h.v.subCalls)
	}
	for name, key := range map[string]string{
		"a control character": "kb-access\x00key",
		"a line break":        "kb-access-key\r\nX-Other: 1",
		"not ASCII":           "kb-accèss-key",
		"too long":            strings.Repeat("k", 513),
	} {
		_, err := h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: key})
		h.wantAPIError(err, 400, "parameter_invalid", "access_key")
		if n := calls(); n != 0 {
			t.Fatalf("%s: Karbon was called %d times", name, n)
		}
	}
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))
	_, err := h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true, AccessKey: "kb\tkey"})
	h.wantAPIError(err, 400, "parameter_invalid", "access_key")
	_, err = h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: "kb-wrong-key-0b9d"})
	h.secret("kb-wrong-key-0b9d")
	h.wantAPIError(err, 409, "role_connected", "role")
	if _, err := h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: strings.Repeat("k", 512)}); err == nil {
		t.Fatal("a second connection of the role")
	}
}

// The vendor failing the consent is the vendor's outage, 502; the
// administrator's refusal stays consent_denied. Both leave the connection
// pending with the reason.
func TestVendorErrorOnTheCallbackIs502(t *testing.T) {
	h := newHarness(t)
	for _, code := range []string{"server_error", "temporarily_unavailable"} {
		v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
		state := h.allow(v.AuthorizeURL).Get("state")
		_, err := h.m.Callback(ctx, url.Values{"error": {code}, "state": {state}}, adminBrowser)
		h.wantAPIError(err, 502, "upstream_unavailable", "")
		if c := h.stored(v.ID); c.Status != connection.Pending || !strings.Contains(c.Reason, code) {
			t.Fatalf("%s: %+v", code, c)
		}
		if _, err := h.m.Disconnect(ctx, "frm_a", v.ID); err != nil {
			t.Fatal(err)
		}
	}
}

// A reconnect whose consent no longer reaches the organisation connected
// before waits for the administrator's choice among what it reaches, even
// one; choosing another purges the old organisation's copy before the
// connection says it reaches the new one; choosing the one before again
// purges nothing.
func TestReconnectToAnotherOrganisationIsChosenAndPurgesTheOld(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "ledger", System: "xero"}))
	if c := h.check(h.m.Callback(ctx, h.allow(v.AuthorizeURL), adminBrowser)); c.OrganisationID != "org-1" {
		t.Fatalf("first: %+v", c.Connection)
	}
	h.v.mu.Lock()
	h.v.tenants = []map[string]string{{"id": "c2", "tenantId": "org-2", "tenantType": "ORGANISATION", "tenantName": "Second"}}
	h.v.mu.Unlock()
	r := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true}))
	waiting := h.check(h.m.Callback(ctx, h.allow(r.AuthorizeURL), adminBrowser))
	if waiting.Status != connection.ChooseOrganisation || len(waiting.Choices) != 1 || waiting.Choices[0].ID != "org-2" ||
		waiting.OrganisationID != "org-1" || !strings.Contains(waiting.Reason, "Hollis Ledger") {
		t.Fatalf("a reconnect reaching another organisation only: %+v", waiting.Connection)
	}
	if purges := purgesOf(h); len(purges) != 0 {
		t.Fatalf("purged before a choice: %q", purges)
	}
	chosen := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{OrganisationID: "org-2"}))
	if chosen.Status != connection.Connected || chosen.OrganisationID != "org-2" {
		t.Fatalf("chosen: %+v", chosen.Connection)
	}
	lines := h.store.history.all()
	purge := slices.Index(lines, "purge "+v.ID+" org-1")
	connected := slices.Index(lines, v.ID+" connected org-2")
	if purge < 0 || connected < purge {
		t.Fatalf("the old organisation's purge and the new one's write: %q", lines)
	}

	// Back to a consent reaching both: the one it has is kept, nothing
	// purged.
	h.v.mu.Lock()
	h.v.tenants = append(h.v.tenants, map[string]string{"id": "c1", "tenantId": "org-1", "tenantType": "ORGANISATION", "tenantName": "Hollis Ledger"})
	h.v.mu.Unlock()
	r = h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true}))
	if back := h.check(h.m.Callback(ctx, h.allow(r.AuthorizeURL), adminBrowser)); back.Status != connection.Connected || back.OrganisationID != "org-2" {
		t.Fatalf("a reconnect reaching the organisation: %+v", back.Connection)
	}
	if purges := purgesOf(h); len(purges) != 1 {
		t.Fatalf("purges %q, want the one choice's", purges)
	}
}

func purgesOf(h *harness) []string {
	var out []string
	for _, l := range h.store.history.all() {
		if strings.HasPrefix(l, "purge ") {
			out = append(out, l)
		}
	}
	return out
}

// A new access key is a new attempt, which every instance opens Karbon
// again for; a refused one changes nothing.
func TestKarbonReconnectIsANewAttempt(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))
	h.v.mu.Lock()
	h.v.karbonKey = "kb-rotated-key-5e6a"
	h.v.mu.Unlock()
	_, err := h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true, AccessKey: "kb-access-key-7c1f"})
	h.wantAPIError(err, 400, "parameter_invalid", "access_key")
	if c := h.stored(v.ID); c.Attempt != v.Attempt {
		t.Fatalf("a refused key changed the attempt: %+v", c)
	}
	again := h.check(h.m.Update(ctx, "frm_a", v.ID, connection.Request{Reconnect: true, AccessKey: "kb-rotated-key-5e6a"}))
	if again.Attempt != v.Attempt+1 || again.Status != connection.Connected {
		t.Fatalf("reconnected with a new key: %+v", again.Connection)
	}
}

// The hourly check pauses a connection only when Karbon refuses the key
// twice: one refusal followed by an accepted call is a glitch.
func TestKarbonRefusalIsConfirmed(t *testing.T) {
	h := newHarness(t)
	v := h.check(h.m.Connect(ctx, "frm_a", connection.Request{Role: "records", System: "karbon", AccessKey: h.v.karbonKey}))
	h.v.mu.Lock()
	h.v.karbonGlitches = 1
	h.v.mu.Unlock()
	_ = h.m.CheckSubscriptions(ctx)
	if c := h.stored(v.ID); c.Status != connection.Connected {
		t.Fatalf("one refusal paused the connection: %+v", c)
	}
	h.v.mu.Lock()
	h.v.karbonKey = "kb-another-key-1111"
	h.v.mu.Unlock()
	_ = h.m.CheckSubscriptions(ctx)
	if c := h.stored(v.ID); c.Status != connection.NeedsReconnect || !strings.Contains(c.Reason, "Karbon no longer accepts this connection's access key") {
		t.Fatalf("after Karbon refused the key twice: %+v", c)
	}
}
