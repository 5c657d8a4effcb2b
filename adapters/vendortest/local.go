package vendortest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/practicegw/practicegw/internal/occupant"
)

// FirstPort is where Local starts by default: Karbon, then Xero (with
// Xero Practice Manager), Microsoft Graph, Google Drive, Dropbox and
// QuickBooks Online on the ports after it, as
// config/try-connections.Caddyfile names them.
const FirstPort = 7101

// Served is one double as Local serves it: its name, its base URL and
// what a gateway's connect block needs to reach it.
type Served struct {
	Name, URL string
	// Connect is what to give the gateway and the consent page: the app's
	// client id and secret, Karbon's bearer and a firm's access key.
	Connect []string
}

// Local is every vendor double on fixed local ports with a little seeded
// data, so that practicegw's connections can be tried without a vendor
// account (cmd/practicegw-vendors). Each double is the one the tests use:
// it runs on its own loopback port as ever, and a front server on the
// fixed port passes requests to it, so the URLs it writes (paging links,
// its consent page) name the fixed port. Karbon tells its subscribers of
// the changes made through its API, as Karbon does. With a state file,
// what the doubles issued (grants and their tokens, Karbon's webhook
// subscriptions) is kept there, and taken back by the next Local.
type Local struct {
	Served []Served
	// The doubles, for a caller that changes them as their vendor's
	// users would.
	Karbon     *Karbon
	Xero       *Xero
	XPM        *XPM
	Graph      *Graph
	GDrive     *GDrive
	Dropbox    *Dropbox
	QuickBooks *QuickBooks

	fronts  []*http.Server
	closers []func()
	// state is the file what the doubles issued is kept in ("": none);
	// saved is what it holds.
	state  string
	saved  []byte
	stop   chan struct{}
	saving sync.WaitGroup
	closed sync.Once
}

// LocalOptions say where ServeLocal serves the doubles.
type LocalOptions struct {
	// Host is the address they listen on; First the port of the first
	// (Karbon), the others on the ports after it.
	Host  string
	First int
	// Gateway is the gateway's public_url, whose /connect/callback the
	// consent pages return to (its localhost and 127.0.0.1 spellings
	// alike).
	Gateway string
	// State is the file what the doubles issue is kept in across a
	// restart; "" keeps nothing.
	State string
}

// ServeLocal starts the doubles as o says. Close stops them.
func ServeLocal(o LocalOptions) (*Local, error) {
	host, first, gateway := o.Host, o.First, o.Gateway
	l := &Local{state: o.State, stop: make(chan struct{})}
	epoch := time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)
	callbacks := callbacksOf(gateway)
	addr := func(i int) string { return net.JoinHostPort(host, strconv.Itoa(first+i)) }
	var errs []error
	front := func(i int, name string, to func(r *http.Request) string, connect ...string) string {
		ln, err := net.Listen("tcp", addr(i))
		if err != nil {
			if by, _ := occupant.Listening(addr(i)); len(by) > 0 {
				err = fmt.Errorf("%s is already answered by %s: are the doubles running already? Stop them, or serve "+
					"these elsewhere (--port)", addr(i), occupant.Describe(by))
			}
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			return ""
		}
		base := "http://" + ln.Addr().String()
		proxy := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) {
			target, _ := url.Parse(to(pr.In))
			pr.SetURL(target)
			pr.Out.Host = pr.In.Host
		}}
		srv := &http.Server{Handler: proxy, ReadHeaderTimeout: 10 * time.Second}
		go srv.Serve(ln)
		l.fronts = append(l.fronts, srv)
		l.Served = append(l.Served, Served{Name: name, URL: base, Connect: connect})
		return base
	}

	k := NewKarbon()
	k.NotifyChanges(0)
	l.closers = append(l.closers, k.Close)
	k.AddUser(KarbonUser{Id: "U1", Name: "Pat Partner", EmailAddress: "pat@hollis.example", Roles: []string{"Partner"}})
	for i := range 8 {
		k.AddContact(KarbonContact{ContactKey: fmt.Sprintf("C%03d", i), FirstName: localFirstNames[i], LastName: "Client",
			ContactType: "Client", Email: fmt.Sprintf("client%d@example.com", i), Country: "GB", OwnerKey: "U1", LastModified: epoch})
		deadline := epoch.AddDate(0, 1, i).Format(time.RFC3339)
		k.AddWorkItem(KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%04d", i), Title: fmt.Sprintf("Year-end accounts %d", 2025+i%2),
			AssigneeKey: "U1", ClientKey: fmt.Sprintf("C%03d", i), ClientType: "Contact", StartDate: epoch.Format(time.RFC3339),
			DeadlineDate: &deadline, WorkType: "Accounts", PrimaryStatus: "InProgress"})
	}
	karbon := k.srv.URL
	k.URL = front(0, "Karbon", fixed(karbon), "bearer "+k.Bearer, "a firm's access key: "+k.AccessKey)

	x, xpm := NewXero(), NewXPM()
	l.closers = append(l.closers, x.Close, xpm.Close)
	// One Xero app and one identity service reach both APIs, as at Xero.
	xpm.Identity = x.Identity
	for i := range 8 {
		x.AddInvoice(XeroInvoice{InvoiceID: fmt.Sprintf("00000000-0000-0000-0000-%012d", i), InvoiceNumber: fmt.Sprintf("INV-%04d", i),
			Status: "AUTHORISED", ContactID: fmt.Sprintf("xc-%d", i), ContactName: localFirstNames[i] + " Client",
			Date: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "1200.00", AmountDue: "1200.00", CurrencyCode: "GBP", Updated: epoch})
		xpm.AddClient(XPMClient{UUID: fmt.Sprintf("c0000000-0000-0000-0000-%012d", i), Name: localFirstNames[i] + " Client",
			Email: fmt.Sprintf("client%d@example.com", i), Country: "United Kingdom", Modified: epoch})
		xpm.AddJob(XPMJob{ID: fmt.Sprintf("J%06d", i), UUID: fmt.Sprintf("j0000000-0000-0000-0000-%012d", i), Name: "Year-end accounts",
			ClientUUID: fmt.Sprintf("c0000000-0000-0000-0000-%012d", i), State: "In Progress", Type: "Accounts",
			Start: epoch, Due: epoch.AddDate(0, 1, i), Created: epoch})
	}
	// Proposals, so that the trial shows engagements whichever system
	// keeps them: a quote in Xero and in XPM, and (below) an estimate in
	// QuickBooks, for four clients, in each of the states a proposal
	// passes through.
	for i, st := range localProposals {
		date := epoch.AddDate(0, 0, -7*(i+1))
		x.AddQuote(XeroQuote{QuoteID: fmt.Sprintf("00000000-0000-0000-0001-%012d", i), QuoteNumber: fmt.Sprintf("QU-%04d", i+1),
			Title: "Year-end accounts and tax return", Status: st.xero, ContactID: fmt.Sprintf("xc-%d", i), ContactName: localFirstNames[i] + " Client",
			Date: date, Expiry: date.AddDate(0, 1, 0), Lines: []string{"Year-end accounts", "Tax return"}, Total: "1800.00", CurrencyCode: "GBP",
			Updated: date})
		xpm.AddQuote(XPMQuote{ID: fmt.Sprintf("Q%06d", i+1), Name: "Year-end accounts and tax return", Type: "Quote", State: st.xpm,
			ClientUUID: fmt.Sprintf("c0000000-0000-0000-0000-%012d", i), Date: date, Valid: date.AddDate(0, 1, 0), Amount: "1800.00", Tax: "360.00",
			Tasks: []string{"Year-end accounts", "Tax return"}})
	}
	xeroAPI, xpmAPI := x.srv.URL, xpm.srv.URL
	base := front(1, "Xero and Xero Practice Manager", func(r *http.Request) string {
		if strings.HasPrefix(r.URL.Path, "/practicemanager") {
			return xpmAPI
		}
		return xeroAPI
	}, "client_id "+x.Identity.ClientID, "client_secret "+x.Identity.ClientSecret)
	x.URL, xpm.URL, x.Identity.URL = base+"/api.xro/2.0", base+"/practicemanager", base

	g := NewGraph()
	l.closers = append(l.closers, g.Close)
	gd := NewGDrive()
	l.closers = append(l.closers, gd.Close)
	d := NewDropbox()
	l.closers = append(l.closers, d.Close)
	for i := range 4 {
		p := fmt.Sprintf("/Clients/%s Client/2025/Tax return/Tax return 2025.pdf", localFirstNames[i])
		g.AddFile(p, 120_000, "application/pdf", epoch)
		gd.AddFile(p, 120_000, "application/pdf", epoch)
		d.AddFile(p, 120_000, epoch)
	}
	// The letters of the proposals: sent with each one that went out,
	// and signed back for those accepted, filed beside them.
	for i, st := range localProposals {
		date := epoch.AddDate(0, 0, -7*(i+1))
		var files []string
		if st.sent {
			files = append(files, fmt.Sprintf("/Clients/%s Client/2026/Engagement/Engagement letter 2026.pdf", localFirstNames[i]))
		}
		if st.signed {
			files = append(files, fmt.Sprintf("/Clients/%s Client/2026/Engagement/Signed engagement letter 2026.pdf", localFirstNames[i]))
		}
		for j, p := range files {
			at := date.AddDate(0, 0, 2*j)
			g.AddFile(p, 80_000, "application/pdf", at)
			gd.AddFile(p, 80_000, "application/pdf", at)
			d.AddFile(p, 80_000, at)
		}
	}
	// Two SharePoint sites, so that a consent is followed by choosing
	// one: Clients, whose library holds the files, and Marketing's empty
	// one. A OneDrive connection reads the Clients files too.
	g.AddSite("Marketing")
	graph, drive, dropbox := g.srv.URL, gd.srv.URL, d.srv.URL
	base = front(2, "Microsoft Graph (SharePoint, OneDrive)", fixed(graph), "client_id "+g.Identity.ClientID, "client_secret "+g.Identity.ClientSecret,
		"sites Clients (with the files) and Marketing")
	g.URL, g.Identity.URL = base+"/v1.0", base
	base = front(3, "Google Drive", fixed(drive), "client_id "+gd.Identity.ClientID, "client_secret "+gd.Identity.ClientSecret)
	gd.URL, gd.Identity.URL = base+"/drive/v3", base
	base = front(4, "Dropbox", fixed(dropbox), "client_id "+d.Identity.ClientID, "client_secret "+d.Identity.ClientSecret)
	d.URL, d.Identity.URL = base, base

	q := NewQuickBooks()
	l.closers = append(l.closers, q.Close)
	for i := range 8 {
		q.AddInvoice(QBInvoice{ID: strconv.Itoa(100 + i), DocNumber: fmt.Sprintf("10%02d", i), CustomerID: strconv.Itoa(i + 1),
			CustomerName: localFirstNames[i] + " Client", TxnDate: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "900.00", Balance: "900.00",
			Created: epoch, Updated: epoch})
	}
	for i, st := range localProposals {
		date := epoch.AddDate(0, 0, -7*(i+1))
		id := strconv.Itoa(500 + i)
		q.AddEstimate(QBEstimate{ID: id, DocNumber: fmt.Sprintf("E%03d", i+1), CustomerID: strconv.Itoa(i + 1),
			CustomerName: localFirstNames[i] + " Client", TxnDate: date, Lines: []string{"Year-end accounts", "Tax return"}, Total: "1500.00",
			EmailStatus: map[bool]string{true: "EmailSent", false: "NotSet"}[st.sent], Created: date, Updated: date})
		if st.quickbooks != "Pending" {
			q.SetEstimateStatus(id, st.quickbooks, date.AddDate(0, 0, 2))
		}
	}
	quickbooks := q.srv.URL
	base = front(5, "QuickBooks Online", fixed(quickbooks), "client_id "+q.Identity.ClientID, "client_secret "+q.Identity.ClientSecret)
	q.URL, q.Identity.URL = base, base

	for _, id := range []*Identity{x.Identity, g.Identity, gd.Identity, d.Identity, q.Identity} {
		for _, c := range callbacks {
			id.AllowRedirect(c)
		}
	}
	l.Karbon, l.Xero, l.XPM, l.Graph, l.GDrive, l.Dropbox, l.QuickBooks = k, x, xpm, g, gd, d, q
	if err := errors.Join(errs...); err != nil {
		l.Close()
		return nil, fmt.Errorf("serving the vendor doubles: %w", err)
	}
	if l.state != "" {
		if err := l.load(); err != nil {
			l.Close()
			return nil, fmt.Errorf("taking back what the doubles issued: %w", err)
		}
		l.saving.Add(1)
		go l.keep()
	}
	return l, nil
}

// keep writes what the doubles issued to the state file, within a second
// of its changing, until Close.
func (l *Local) keep() {
	defer l.saving.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-tick.C:
			if err := l.save(); err != nil {
				fmt.Fprintln(os.Stderr, "practicegw-vendors: keeping what the doubles issued:", err)
			}
		}
	}
}

// Close stops every double and its front, having written what they
// issued.
func (l *Local) Close() error {
	var err error
	l.closed.Do(func() {
		close(l.stop)
		l.saving.Wait()
		if l.state != "" && l.Karbon != nil {
			err = l.save()
		}
		for _, s := range l.fronts {
			s.Close()
		}
		for _, c := range l.closers {
			c()
		}
	})
	return err
}

var localFirstNames = []string{"Ada", "Ben", "Cleo", "Dev", "Esme", "Finn", "Gita", "Hal"}

// localProposals are the seeded proposals of the first four clients, in
// each vendor's words: accepted and signed, accepted and signed, sent,
// and a draft not sent yet.
var localProposals = []struct {
	xero, xpm, quickbooks string
	sent, signed          bool
}{
	{"ACCEPTED", "Accepted", "Accepted", true, true},
	{"ACCEPTED", "Accepted", "Accepted", true, true},
	{"SENT", "Issued", "Pending", true, false},
	{"DRAFT", "Draft", "Pending", false, false},
}

func fixed(target string) func(*http.Request) string {
	return func(*http.Request) string { return target }
}

// callbacksOf are the consent callbacks of a gateway reached at base, in
// both of the loopback spellings a browser may use.
func callbacksOf(base string) []string {
	base = strings.TrimRight(base, "/")
	out := []string{base + "/connect/callback"}
	for _, swap := range [][2]string{{"//localhost", "//127.0.0.1"}, {"//127.0.0.1", "//localhost"}} {
		if strings.Contains(base, swap[0]) {
			out = append(out, strings.Replace(base, swap[0], swap[1], 1)+"/connect/callback")
		}
	}
	return out
}
