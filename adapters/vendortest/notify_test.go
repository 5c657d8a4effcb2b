package vendortest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// Karbon tells a record's changes within its window as one notification
// when the window ends: Inserted for a record made in it, Deleted for one
// gone, else Updated; nothing is told before the window ends.
func TestKarbonCoalescesARecordsChanges(t *testing.T) {
	k := StartKarbon(t)
	rc := &receiver{key: "karbon-signing-key-0001", status: http.StatusOK}
	srv := httptest.NewServer(rc)
	t.Cleanup(srv.Close)
	for _, typ := range []string{"Work", "Contact"} {
		if code, _ := karbonCall(t, k, k.AccessKey, http.MethodPost, "/v3/WebhookSubscriptions",
			`{"TargetUrl":"`+srv.URL+`","WebhookType":"`+typ+`","SigningKey":"karbon-signing-key-0001"}`); code != http.StatusCreated {
			t.Fatalf("subscribe %s: %d", typ, code)
		}
	}
	const window = 300 * time.Millisecond
	k.NotifyChanges(window)
	start := time.Now()
	k.AddWorkItem(KarbonWorkItem{WorkItemKey: "W1", Title: "Payroll", ClientKey: "C1", ClientType: "Contact", PrimaryStatus: "Planned"})
	k.MoveWorkItem("W1", "InProgress", "")
	k.AddContact(KarbonContact{ContactKey: "C9", FirstName: "Ann", LastName: "Lee", ContactType: "Client"})
	k.RemoveContact("C9")
	verified := func() []string {
		rc.mu.Lock()
		defer rc.mu.Unlock()
		return append([]string(nil), rc.verified...)
	}
	eventually.True(t, 10*time.Second, 10*time.Millisecond, "two notifications", func() bool { return len(verified()) == 2 })
	if time.Since(start) < window {
		t.Fatal("told before the window ended")
	}
	got := map[string]string{}
	for _, b := range verified() {
		var n struct{ ResourcePermaKey, ActionType string }
		json.Unmarshal([]byte(b), &n)
		got[n.ResourcePermaKey] = n.ActionType
	}
	if got["W1"] != "Inserted" || got["C9"] != "Deleted" || len(got) != 2 {
		t.Fatalf("told %v", got)
	}
	k.MoveWorkItem("W1", "Completed", "")
	k.FlushNotifications()
	if v := verified(); len(v) != 3 || !strings.Contains(v[2], `"Updated"`) {
		t.Fatalf("after a flush: %v", v)
	}
}

// Intuit tells the changes of a period together when it ends, in one
// signed CloudEvents body.
func TestQuickBooksBatchesByThePeriod(t *testing.T) {
	q := StartQuickBooks(t)
	var (
		mu     sync.Mutex
		bodies []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("intuit-signature") != SignQuickBooks(q.VerifierToken, b) {
			t.Error("an unsigned notification")
		}
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	q.NotifyEvery(srv.URL, 500*time.Millisecond)
	at := time.Now()
	q.AddInvoice(QBInvoice{ID: "1", DocNumber: "1001", CustomerID: "7", CustomerName: "Birch", TxnDate: at, DueDate: at, Total: "10.00", Updated: at})
	q.Pay("1", "Visa", "", at)
	q.Delete("1", at)
	eventually.True(t, 10*time.Second, 10*time.Millisecond, "the period's notification", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(bodies) == 1
	})
	var events []struct{ Type, Intuitentityid string }
	json.Unmarshal([]byte(bodies[0]), &events)
	var types []string
	for _, e := range events {
		types = append(types, e.Type)
	}
	if strings.Join(types, " ") != "qbo.invoice.created.v1 qbo.payment.created.v1 qbo.invoice.updated.v1 qbo.invoice.deleted.v1" {
		t.Fatalf("one body of %v", types)
	}
}
