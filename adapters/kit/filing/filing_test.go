package filing_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/demo"
	"github.com/practicegw/practicegw/adapters/kit/filing"
	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/practice"
)

// The default rules must read the demo firms' documents, filed the way
// practices file them, as the kinds the demo gave them.
func TestDefaultRulesReadTheDemoFiling(t *testing.T) {
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "demo.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	firms := []string{"frm_acme", "frm_birch", "frm_cedar"}
	recs, err := demo.Open(db, firms)
	if err != nil {
		t.Fatal(err)
	}
	c, err := filing.New(filing.Config{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	total, wrong := 0, 0
	for _, firm := range firms {
		cursor := ""
		for {
			p, err := recs.List(context.Background(), practice.Tenant{Firm: firm}, practice.Documents, practice.Query{Cursor: cursor, Limit: 200})
			if err != nil {
				t.Fatal(err)
			}
			for _, raw := range p.Items {
				var d practice.Document
				json.Unmarshal(raw, &d)
				rel := strings.TrimPrefix(d.Location.Path, "/Clients")
				total++
				if got := c.Kind(rel, d.Name); got != d.Kind {
					wrong++
					if wrong < 10 {
						t.Errorf("%s%s: %s, want %s", d.Location.Path, d.Name, got, d.Kind)
					}
				}
			}
			if !p.HasMore {
				break
			}
			cursor = p.Next
		}
	}
	if total < 2000 || wrong > 0 {
		t.Fatalf("%d of %d documents misread", wrong, total)
	}
}

func TestKindRules(t *testing.T) {
	c, err := filing.New(filing.Config{KindRules: []filing.Rule{{Match: []string{"kyc pack"}, Kind: "identity_verification"},
		{Match: []string{"permanent file"}, Kind: "working_paper"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ rel, name, want string }{
		{"/Tax Solutions Ltd/2025/Accounts", "Statutory accounts.pdf", "financial_statements"},
		{"/Tax Solutions Ltd/2025", "Notes.docx", "other"},
		{"/Acme/Engagement_Letters", "EL-2025 signed.pdf", "signed_engagement_letter"},
		{"/Acme/Permanent file", "Deed.pdf", "working_paper"},
		{"/Acme/KYC-pack", "scan.jpg", "identity_verification"},
		{"/Acme/Emails", "Re: fees.eml", "correspondence"},
		{"/Acme", "accountant.pdf", "other"},
	} {
		if got := c.Kind(tc.rel, tc.name); got != tc.want {
			t.Errorf("%s/%s: %s, want %s", tc.rel, tc.name, got, tc.want)
		}
	}
	if _, err := filing.New(filing.Config{KindRules: []filing.Rule{{Match: []string{"x"}, Kind: "tax"}}}, nil); err == nil {
		t.Fatal("an unknown kind was accepted")
	}
}

// names is a records system with one client per name; asked says which
// candidates it was asked about.
type names struct {
	ids   map[string]string
	asked map[string]linking.Candidate
}

func (n names) LinkClient(_ context.Context, _ practice.Tenant, c linking.Candidate) (linking.Link, error) {
	n.asked[c.Name] = c
	if id := n.ids[c.Name]; id != "" {
		return linking.Link{Client: id, Outcome: linking.Linked}, nil
	}
	return linking.Link{}, nil
}

func TestClient(t *testing.T) {
	n := names{ids: map[string]string{"Acme Ltd": "cli_o-O1"}, asked: map[string]linking.Candidate{}}
	c, _ := filing.New(filing.Config{}, n)
	ctx := context.Background()
	for rel, want := range map[string]string{
		"/Acme Ltd/2025/Tax return":  "cli_o-O1",
		"/Birch LLP [cli_c-C9]/2025": "cli_c-C9",
		"/Unknown/2025":              "",
		"":                           "",
	} {
		got, err := c.Client(ctx, practice.Tenant{Firm: "f"}, rel)
		if err != nil || practice.ValueOf(got) != want || want == "" && got != nil {
			t.Errorf("%q: %v, %v; want %q", rel, got, err, want)
		}
	}
	// A folder is asked about by its path below the root, the key it is
	// counted by, and by its name.
	if a := n.asked["Unknown"]; a.Ref != "/Unknown" || a.External != "" {
		t.Errorf("asked %+v", a)
	}
}

func TestDocID(t *testing.T) {
	for _, id := range []string{"id:a4ayc_80_OEAAAAAAAAAXw", "01BYE5RZ6QN3ZWBTUFOFD3GSPGOHDJD36K", "1a2B-_x"} {
		doc := filing.DocID(id)
		if strings.ContainsAny(doc[4:], ":/+=") {
			t.Errorf("%s is not url-safe", doc)
		}
		if got, ok := filing.ParseDocID(doc); !ok || got != id {
			t.Errorf("%s: %q", doc, got)
		}
	}
	for _, bad := range []string{"doc_", "doc_!!", "inv_abc", "doc_" + strings.Repeat("A", 600)} {
		if _, ok := filing.ParseDocID(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}
