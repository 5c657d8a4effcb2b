package sharepoint_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"golang.org/x/oauth2"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/adapters/kit/oauthtoken"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/adapters/sharepoint"
	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// microsoftApp is the connect block's sharepoint app registered against
// the Graph double, its base_url Graph's origin as Microsoft's published
// one is (https://graph.microsoft.com).
func microsoftApp(t *testing.T, g *vendortest.Graph, baseURL string) *sharepoint.App {
	t.Helper()
	a := &sharepoint.App{OAuthApp: firmsystem.OAuthApp{ClientID: g.Identity.ClientID, ClientSecret: g.Identity.ClientSecret,
		TokenURL: g.Identity.URL + "/common/oauth2/v2.0/token", BaseURL: baseURL}}
	if err := a.Provision(caddy.Context{}); err != nil {
		t.Fatal(err)
	}
	if err := a.Validate(); err != nil {
		t.Fatal(err)
	}
	return a
}

// openConnected opens connection c of system as the gateway does: the
// module its system names configured from the app and the connection,
// then loaded from its JSON, with the consent's token saved where the
// module reads it.
func openConnected(t *testing.T, g *vendortest.Graph, app *sharepoint.App, system string, c firmsystem.Connection) practice.Reader {
	t.Helper()
	id := firmsystem.Namespace("documents") + "." + system
	info, err := caddy.GetModule(id)
	if err != nil {
		t.Fatal(err)
	}
	mod := info.New().(firmsystem.Connectable)
	if err := mod.Configure(app, c); err != nil {
		t.Fatal(err)
	}
	raw, err := json.Marshal(mod)
	if err != nil {
		t.Fatal(err)
	}
	d := upstream.Deps{State: changes.NewMemoryState()}
	consent := &oauth2.Token{AccessToken: g.Token, RefreshToken: "rt-consent", TokenType: "Bearer", Expiry: time.Now().Add(time.Hour)}
	if err := oauthtoken.Seed(context.Background(), d, oauthtoken.Graph, app.Refresh(c.ID), consent); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	loaded, err := cctx.LoadModuleByID(id, raw)
	if err != nil {
		t.Fatalf("%s's configuration %s: %v", system, raw, err)
	}
	opened, err := loaded.(firmsystem.Module).Open(firmsystem.Deps{Firm: "frm_acme", Upstream: d})
	if err != nil {
		t.Fatal(err)
	}
	return opened.Reader
}

// drives are the drive ids of the documents r lists.
func drives(t *testing.T, r practice.Reader) []string {
	t.Helper()
	var out []string
	for _, raw := range vendortest.ListAll(t, r, live, practice.Documents, practice.Filter{}, 50) {
		var d practice.Document
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		out = append(out, d.Location.DriveID)
	}
	return out
}

// A SharePoint connection names the site its administrator chose among
// those Graph's site search lists; it serves the files of that site's
// default document library (GET /sites/{site}/drive), whether the
// connect block's base_url is Graph's origin, as Microsoft publishes it,
// or its /v1.0 API. A connection made before the drive was resolved
// holds the same site id, and opens the same way.
func TestConnectedSiteServesItsDocumentLibrary(t *testing.T) {
	g := vendortest.NewGraph()
	defer g.Close()
	for _, p := range []string{"/Ada Client/Tax return 2025.pdf", "/Ben Client/Accounts 2025.pdf"} {
		g.AddFile(p, 1000, "application/pdf", epoch)
	}
	marketing, marketingDrive := g.AddSite("Marketing")
	origin := strings.TrimSuffix(g.URL, "/v1.0")
	for _, base := range []string{origin, g.URL} {
		app := microsoftApp(t, g, base)
		orgs, err := app.Organisations(context.Background(), upstream.Deps{}, "sharepoint", g.Token)
		if err != nil {
			t.Fatalf("base_url %s: the sites: %v", base, err)
		}
		want := []firmsystem.Organisation{{ID: g.SiteID, Name: "Clients"}, {ID: marketing, Name: "Marketing"}}
		if !slices.Equal(orgs, want) {
			t.Fatalf("base_url %s: the organisations %+v, want %+v", base, orgs, want)
		}
		got := drives(t, openConnected(t, g, app, "sharepoint", firmsystem.Connection{ID: "con_sp", Organisation: g.SiteID}))
		if len(got) != 2 || got[0] != g.DriveID || got[1] != g.DriveID {
			t.Errorf("base_url %s: the Clients site's documents are in drives %v, want 2 in %s", base, got, g.DriveID)
		}
		// The other site's library is empty: nothing of the first's.
		if got := drives(t, openConnected(t, g, app, "sharepoint", firmsystem.Connection{ID: "con_mk", Organisation: marketing})); len(got) != 0 {
			t.Errorf("base_url %s: the Marketing site (library %s) lists %v", base, marketingDrive, got)
		}
	}
}

// A OneDrive connection reaches one account: its drive is the signed-in
// user's (GET /me/drive).
func TestConnectedOneDriveServesTheUsersDrive(t *testing.T) {
	g := vendortest.NewGraph()
	defer g.Close()
	g.AddFile("/Ada Client/Tax return 2025.pdf", 1000, "application/pdf", epoch)
	app := microsoftApp(t, g, strings.TrimSuffix(g.URL, "/v1.0"))
	got := drives(t, openConnected(t, g, app, "onedrive", firmsystem.Connection{ID: "con_od"}))
	if len(got) != 1 || got[0] != g.DriveID {
		t.Fatalf("the OneDrive's documents are in drives %v, want 1 in %s", got, g.DriveID)
	}
}

// A site that is gone is the vendor failing the firm's configuration,
// never a document the caller asked for that is missing.
func TestSiteWithoutLibraryIsNoMissingDocument(t *testing.T) {
	g := vendortest.NewGraph()
	defer g.Close()
	app := microsoftApp(t, g, strings.TrimSuffix(g.URL, "/v1.0"))
	r := openConnected(t, g, app, "sharepoint", firmsystem.Connection{ID: "con_sp", Organisation: "contoso.sharepoint.com,gone,gone"})
	_, err := r.List(context.Background(), live, practice.Documents, practice.Query{Limit: 10})
	if err == nil || errors.Is(err, practice.ErrNotFound) || !errors.Is(err, practice.ErrBadUpstream) {
		t.Fatalf("listing a gone site's library: %v; want a bad upstream answer", err)
	}
}

// The site's drive is read once, however many callers want it first; a
// read that fails or a caller that gives up leaves it to the next; no
// caller is ever answered from another drive. Each seed draws the number
// of callers, the faults the double answers in turn (503s, slow answers)
// and which callers give up at once, and runs them together.
func TestSiteDriveIsReadOnceUnderConcurrentFirstUse(t *testing.T) {
	for seed := int64(1); seed <= 40; seed++ {
		rng := rand.New(rand.NewSource(seed))
		g := vendortest.NewGraph()
		g.AddFile("/Ada Client/Tax return 2025.pdf", 1000, "application/pdf", epoch)
		g.AddFile("/Ben Client/Accounts 2025.pdf", 1000, "application/pdf", epoch)
		var driveReads, driveAnswers atomic.Int64
		front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/drive") {
				driveReads.Add(1)
				rec := &statusRecorder{ResponseWriter: w}
				g.Handler().ServeHTTP(rec, r)
				if rec.status == http.StatusOK {
					driveAnswers.Add(1)
				}
				return
			}
			g.Handler().ServeHTTP(w, r)
		}))
		var faults []vendortest.Fault
		for range rng.Intn(4) {
			if rng.Intn(2) == 0 {
				faults = append(faults, vendortest.Fault{Status: http.StatusServiceUnavailable})
			} else {
				faults = append(faults, vendortest.Fault{Delay: time.Duration(rng.Intn(20)) * time.Millisecond})
			}
		}
		g.Faults.Queue(faults...)
		a, err := sharepoint.New(sharepoint.Config{Firm: "frm_acme", SiteID: g.SiteID, BaseURL: front.URL + "/v1.0",
			OAuth2:   upstream.OAuth2Config{AccessToken: g.Token},
			Upstream: upstream.Policy{RateLimit: -1, Timeout: upstream.Duration(2 * time.Second), MaxAttempts: 1}}, upstream.Deps{})
		if err != nil {
			t.Fatal(err)
		}
		callers := 2 + rng.Intn(7)
		var wg sync.WaitGroup
		errs := make(chan error, callers)
		for i := range callers {
			ctx, cancel := context.WithCancel(context.Background())
			if rng.Intn(4) == 0 {
				cancel() // this caller has given up already
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer cancel()
				page, err := a.List(ctx, live, practice.Documents, practice.Query{Limit: 10})
				if err != nil {
					return // a fault or a caller giving up: the next one asks again
				}
				if n := len(page.Items); n != 2 {
					errs <- fmt.Errorf("caller %d: %d documents, want 2", i, n)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("seed %d: %v", seed, err)
		}
		// After them, the drive is known, or read now once the faults
		// are spent.
		var got []string
		for range len(faults) + 1 {
			page, err := a.List(context.Background(), live, practice.Documents, practice.Query{Limit: 10})
			if err != nil {
				continue
			}
			for _, raw := range page.Items {
				var d practice.Document
				json.Unmarshal(raw, &d)
				got = append(got, d.Location.DriveID)
			}
			break
		}
		if len(got) != 2 || got[0] != g.DriveID || got[1] != g.DriveID {
			t.Errorf("seed %d: documents in drives %v, want 2 in %s", seed, got, g.DriveID)
		}
		if driveAnswers.Load() != 1 || driveReads.Load() > int64(len(faults))+1 {
			t.Errorf("seed %d (%d callers, faults %+v): the drive was read %d times, answered %d; want answered once, read at most %d",
				seed, callers, faults, driveReads.Load(), driveAnswers.Load(), len(faults)+1)
		}
		front.Close()
		g.Close()
	}
}

type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(status int) {
	r.status = status
	r.ResponseWriter.WriteHeader(status)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return r.ResponseWriter.Write(b)
}
