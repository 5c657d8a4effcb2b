package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/eventually"
)

// TestEngagementLettersLinkedWhenUnambiguous: a firm on Xero Practice
// Manager with its letters in SharePoint. An accepted quote's engagement
// links the client's engagement letter and signed letter, each the only one
// of its kind filed within 30 days of the quote's date; a second letter
// filed in the window unlinks the letter, its removal links it again, and
// none of it is a new version of the engagement.
func TestEngagementLettersLinkedWhenUnambiguous(t *testing.T) {
	f := startXPMFirm(t)
	now := time.Now().UTC().Truncate(time.Second)
	client := xpmClientNames[0]
	f.x.AddQuote(vendortest.XPMQuote{ID: "Q000000", Name: "Year-end accounts", State: "Accepted", ClientUUID: xpmClientID(0),
		Date: now.AddDate(0, 0, -7), Amount: "1500.00", Tax: "300.00", Tasks: []string{"Accounts preparation"}})
	dir := "/Clients/" + client + "/2026/Engagement letters/"
	f.g.AddFile(dir+"Engagement letter 2026 - "+client+".pdf", 90_000, "application/pdf", now.AddDate(0, 0, -6))
	f.g.AddFile(dir+"Engagement letter 2026 - "+client+" (signed).pdf", 95_000, "application/pdf", now.AddDate(0, 0, -2))
	// Last year's letter is outside the window.
	f.g.AddFile("/Clients/"+client+"/2025/Engagement letters/Engagement letter 2025 - "+client+".pdf", 90_000,
		"application/pdf", now.AddDate(-1, 0, 0))

	g := f.gateway(t, "PRACTICEGW_SYNC_POLL=1s")
	waitSyncs(t, g, 20*time.Second, "every sync to be live", allLive)
	tok := g.issue("frm_marlowe", false, allReadWrite...).Token

	docs := map[string]string{} // name -> id
	for _, d := range pageAll(t, g, tok, "/v1/documents", 50) {
		docs[d["name"].(string)] = d["id"].(string)
	}
	letter, signed := docs["Engagement letter 2026 - "+client+".pdf"], docs["Engagement letter 2026 - "+client+" (signed).pdf"]
	if letter == "" || signed == "" {
		t.Fatalf("the letters are not documents: %v", docs)
	}
	first := g.do(t, "GET", "/v1/engagements/eng_Q000000", tok, nil).json(t)
	if first["letter_document"] != letter || first["signed_document"] != signed || first["client"] != "cli_"+xpmClientID(0) {
		t.Fatalf("engagement %v, want letter %s and signed letter %s", first, letter, signed)
	}

	links := func() (string, string, any) {
		e := g.do(t, "GET", "/v1/engagements/eng_Q000000", tok, nil).json(t)
		s, _ := e["signed_document"].(string)
		l, _ := e["letter_document"].(string) // null until a letter links
		return l, s, e["version"]
	}
	second := f.g.AddFile(dir+"Engagement letter 2026 - "+client+" v2.pdf", 91_000, "application/pdf", now.AddDate(0, 0, -1))
	eventually.NoError(t, 15*time.Second, 20*time.Millisecond, "the letter unlinked by a second one", func() error {
		if l, s, _ := links(); l != "" || s != signed {
			return fmt.Errorf("letter %q signed %q", l, s)
		}
		return nil
	})
	f.g.Delete(second)
	eventually.NoError(t, 15*time.Second, 20*time.Millisecond, "the letter linked again", func() error {
		if l, s, _ := links(); l != letter || s != signed {
			return fmt.Errorf("letter %q signed %q", l, s)
		}
		return nil
	})
	if _, _, v := links(); v != first["version"] {
		t.Fatalf("the engagement's version went from %v to %v with its letters", first["version"], v)
	}
	// A list answers what a read does.
	for _, e := range pageAll(t, g, tok, "/v1/engagements", 50) {
		if e["id"] == "eng_Q000000" && (e["letter_document"] != letter || e["signed_document"] != signed) {
			t.Fatalf("listed %v", e)
		}
	}
	// A second proposal to the client within the letters' month makes
	// them either engagement's: neither links them.
	f.x.AddQuote(vendortest.XPMQuote{ID: "Q000001", Name: "Tax return", State: "Issued", ClientUUID: xpmClientID(0),
		Date: now.AddDate(0, 0, -3), Amount: "500.00", Tax: "100.00", Tasks: []string{"Personal tax return"}})
	eventually.NoError(t, 15*time.Second, 20*time.Millisecond, "the letters unlinked by a second proposal", func() error {
		other := g.do(t, "GET", "/v1/engagements/eng_Q000001", tok, nil)
		if other.StatusCode != 200 {
			return fmt.Errorf("the second proposal: %d", other.StatusCode)
		}
		o := other.json(t)
		oLetter, _ := o["letter_document"].(string)
		oSigned, _ := o["signed_document"].(string)
		if l, s, _ := links(); l != "" || s != "" || oLetter != "" || oSigned != "" {
			return fmt.Errorf("letter %q signed %q; the second proposal's %v / %v", l, s, o["letter_document"], o["signed_document"])
		}
		return nil
	})
}
