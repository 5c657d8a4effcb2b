package e2e

import (
	"fmt"
	"net/url"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

// TestQuickBooksEstimateAcceptedIsOneSigning: a firm whose ledger is
// QuickBooks Online (and whose block names no records system that keeps
// proposals) has its estimates as engagements, paged and filtered on
// /v1/engagements; an estimate accepted in QuickBooks, read by change
// data capture, is exactly one engagement.signed, however often it is
// read after, and the invoice made of it ends the engagement without
// signing it again; an estimate accepted and told by Intuit's webhook is
// signed too.
func TestQuickBooksEstimateAcceptedIsOneSigning(t *testing.T) {
	q, config := qboCompany(t, 3)
	now := time.Now().UTC().Truncate(time.Second)
	for i, st := range []string{"Pending", "Pending", "Accepted", "Rejected", "Closed"} {
		q.AddEstimate(vendortest.QBEstimate{ID: fmt.Sprint(i + 1), DocNumber: fmt.Sprintf("E%03d", i+1), CustomerID: fmt.Sprint(i + 1),
			CustomerName: fmt.Sprintf("Customer %d", i+1), TxnDate: now.AddDate(0, 0, -7), Lines: []string{"Year-end accounts", "Tax return"},
			Total: "2450.00", Status: st, EmailStatus: "EmailSent", Updated: now.Add(-time.Hour)})
	}
	g := startGateway(t, gatewayOptions{config: config, env: qboEnv(q)})
	waitSyncs(t, g, 30*time.Second, "the QuickBooks sync to be live", allLive)
	tok := g.issue("frm_birch", false, allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "engagement.signed")
	rc.setSecrets(secret)

	engs := checkEngagementPages(t, g, tok, 5, now.Add(-2*time.Hour), 5)
	if e := engs["eng_qb-1"]; e["status"] != "sent" || e["client"] != nil || e["scope"] != "Year-end accounts, Tax return" ||
		e["fee"].(map[string]any)["amount"] != "2450.00" || e["signed_at"] != nil || len(e["released_jobs"].([]any)) != 0 {
		t.Fatalf("pending estimate: %v", e)
	}
	if engs["eng_qb-3"]["status"] != "signed" || engs["eng_qb-4"]["status"] != "declined" || engs["eng_qb-5"]["status"] != "ended" {
		t.Fatalf("accepted, rejected and closed estimates: %v", engs)
	}
	// updated_since is to the second: the acceptance is made a second
	// after every stamp of the backfill.
	after := time.Now().UTC().Truncate(time.Second).Add(time.Second)
	eventually.True(t, 2*time.Second, 10*time.Millisecond, "the next second", func() bool { return time.Now().After(after) })

	accepted := time.Now().UTC()
	q.SetEstimateStatus("1", "Accepted", accepted)
	eventually.NoError(t, 15*time.Second, 20*time.Millisecond, "an engagement.signed for eng_qb-1", func() error {
		if len(signings(rc)["eng_qb-1"]) == 0 {
			return fmt.Errorf("signings: %v", signings(rc))
		}
		return nil
	})
	recent := pageAll(t, g, tok, "/v1/engagements?updated_since="+url.QueryEscape(after.Format(time.RFC3339)), 1)
	if len(recent) != 1 || recent[0]["id"] != "eng_qb-1" || recent[0]["status"] != "signed" || recent[0]["signed_at"] == nil {
		t.Fatalf("engagements updated since the acceptance: %v", recent)
	}
	signedAt := recent[0]["signed_at"]

	// The invoice made of it closes the estimate: ended, still signed
	// when it was, and no second signing however many polls follow.
	q.InvoiceEstimate("1", time.Now().UTC())
	eventually.NoError(t, 15*time.Second, 50*time.Millisecond, "the engagement ended", func() error {
		e := g.do(t, "GET", "/v1/engagements/eng_qb-1", tok, nil).json(t)
		if e["status"] != "ended" || e["signed_at"] != signedAt {
			return fmt.Errorf("eng_qb-1: %v", e)
		}
		return nil
	})
	waitConfirmed(t, g, tok, "/v1/engagements", 2*time.Second)

	// Accepted and told by a webhook: signed at once.
	q.SetEstimateStatus("2", "Accepted", time.Now().UTC())
	body := vendortest.QuickBooksCloudEvents(q.RealmID, vendortest.QBEvent{Entity: "Estimate", ID: "2", Operation: "Update", At: time.Now()})
	if code := postSigned(t, g, "/ingest/frm_birch/quickbooks", body, "intuit-signature", vendortest.SignQuickBooks(q.VerifierToken, body)); code != 200 {
		t.Fatalf("the estimate's webhook answered %d", code)
	}
	eventually.NoError(t, 15*time.Second, 20*time.Millisecond, "an engagement.signed for eng_qb-2", func() error {
		if len(signings(rc)["eng_qb-2"]) == 0 {
			return fmt.Errorf("signings: %v", signings(rc))
		}
		return nil
	})
	waitConfirmed(t, g, tok, "/v1/engagements", 2*time.Second)
	got := signings(rc)
	if len(got) != 2 || len(got["eng_qb-1"]) != 1 || len(got["eng_qb-2"]) != 1 {
		t.Fatalf("engagement.signed deliveries by engagement, want one each for eng_qb-1 and eng_qb-2: %v", got)
	}
	// No records system to link QuickBooks' customer to: the signing
	// names no client, rather than an id /v1/clients answers 404 to.
	if d := got["eng_qb-1"][0]; d["client_id"] != nil || d["released_jobs"] == nil || len(d["released_jobs"].([]any)) != 0 {
		t.Fatalf("signing: %v", d)
	}
}
