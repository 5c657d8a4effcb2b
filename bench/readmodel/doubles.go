package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
)

// size is how much a firm keeps in its systems.
type size struct {
	contacts, orgs, jobs, invoices, documents, people int
}

var (
	small = size{contacts: 180, orgs: 20, jobs: 1000, invoices: 600, documents: 100, people: 8}
	large = size{contacts: 9000, orgs: 1000, jobs: 50000, invoices: 30000, documents: 2000, people: 50}
)

func (s size) String() string {
	return fmt.Sprintf("%d clients, %d work items, %d invoices, %d documents, %d people",
		s.contacts+s.orgs, s.jobs, s.invoices, s.documents, s.people)
}

// vendors are one firm's doubles: Karbon, Xero and SharePoint (Graph).
type vendors struct {
	k *vendortest.Karbon
	x *vendortest.Xero
	g *vendortest.Graph
}

// hits are the requests each double has received so far.
type hits struct{ karbon, xero, graph int }

func (h hits) sub(o hits) hits { return hits{h.karbon - o.karbon, h.xero - o.xero, h.graph - o.graph} }
func (h hits) total() int      { return h.karbon + h.xero + h.graph }
func (h hits) String() string {
	return fmt.Sprintf("%d (Karbon %d, Xero %d, SharePoint %d)", h.total(), h.karbon, h.xero, h.graph)
}

func (v vendors) hits() hits {
	return hits{v.k.Faults.Hits(), v.x.Faults.Hits(), v.g.Faults.Hits()}
}

func (v vendors) close() { v.k.Close(); v.x.Close(); v.g.Close() }

var epoch = time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC)

// statuses cycle over the work items: primary, secondary.
var statuses = [][2]string{{"InProgress", ""}, {"InProgress", "In Review"}, {"Planned", ""},
	{"Waiting", "Waiting on client"}, {"Completed", "Filed"}, {"ReadyToStart", ""}}

// startVendors fills doubles with a practice of size s.
func startVendors(s size) vendors {
	v := vendors{k: vendortest.NewKarbon(), x: vendortest.NewXero(), g: vendortest.NewGraph()}
	v.k.KeepListRows(true)
	for i := range s.people {
		v.k.AddUser(vendortest.KarbonUser{Id: fmt.Sprintf("U%03d", i), Name: fmt.Sprintf("Staff %d", i),
			EmailAddress: fmt.Sprintf("staff%d@firm.example", i), Roles: []string{"Manager"}})
	}
	clients := s.contacts + s.orgs
	name := func(i int) string { return fmt.Sprintf("Client %05d", i) }
	for i := range s.contacts {
		v.k.AddContact(vendortest.KarbonContact{ContactKey: fmt.Sprintf("C%05d", i), FirstName: "Client", LastName: fmt.Sprintf("%05d", i),
			ContactType: "Client", Email: fmt.Sprintf("c%d@example.com", i), Country: "GB", OwnerKey: fmt.Sprintf("U%03d", i%s.people),
			LastModified: epoch, ExternalKey: fmt.Sprintf("xc-%d", i)})
	}
	for i := s.contacts; i < clients; i++ {
		v.k.AddOrganization(vendortest.KarbonOrganization{OrganizationKey: fmt.Sprintf("O%05d", i), FullName: name(i),
			ContactType: "Client", EntityType: "LimitedCompany", Email: fmt.Sprintf("o%d@example.com", i), Country: "GB",
			OwnerKey: fmt.Sprintf("U%03d", i%s.people), ExternalKey: fmt.Sprintf("xc-%d", i), LastModified: epoch})
	}
	for i := range s.jobs {
		c := i % clients
		key, typ := fmt.Sprintf("C%05d", c), "Contact"
		if c >= s.contacts {
			key, typ = fmt.Sprintf("O%05d", c), "Organization"
		}
		st := statuses[i%len(statuses)]
		deadline := epoch.AddDate(0, 0, i%365).Format(time.RFC3339)
		v.k.AddWorkItem(vendortest.KarbonWorkItem{WorkItemKey: fmt.Sprintf("W%06d", i), Title: fmt.Sprintf("Accounts %d", i),
			AssigneeKey: fmt.Sprintf("U%03d", (i/7)%s.people), ClientKey: key, ClientType: typ, StartDate: epoch.Format(time.RFC3339),
			DeadlineDate: &deadline, WorkType: "Accounts", PrimaryStatus: st[0], SecondaryStatus: st[1]})
	}
	for i := range s.invoices {
		c := i % clients
		id := fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		v.x.AddInvoice(vendortest.XeroInvoice{InvoiceID: id, InvoiceNumber: fmt.Sprintf("INV-%05d", i),
			Status: "AUTHORISED", ContactID: fmt.Sprintf("xc-%d", c), ContactName: name(c),
			Date: epoch, DueDate: epoch.AddDate(0, 1, 0), Total: "1200.00", AmountDue: "1200.00", CurrencyCode: "GBP", Updated: epoch})
		if i%3 == 0 {
			v.x.Pay(id, "Stripe payout", epoch.Add(time.Hour))
		}
	}
	folders := max(1, min(clients, s.documents/4))
	for i := range s.documents {
		c := i % folders
		v.g.AddFile(fmt.Sprintf("/Clients/%s/2025/Tax return/Tax return 2025 %d.pdf", name(c), i), 120_000, "application/pdf", epoch)
	}
	return v
}

// firmBlock is a firm on these doubles, configured as
// config/karbon-xero-sharepoint.Caddyfile configures one, with the vendor
// budgets given.
func (v vendors) firmBlock(id, karbonLimit, xeroLimit string) string {
	return fmt.Sprintf(`		firm %s {
			name "Bench %s"
			records karbon {
				access_key %s
				bearer %s
				base_url %s
				stage_map "In Review" in_review
				stage_map "Waiting on client" awaiting_client
				stage_map "Filed" filed
				webhook_signing_key bench-signing-key
				upstream {
					timeout 10s
					rate_limit %s
				}
			}
			ledger xero {
				tenant_id %s
				access_token %s
				base_url %s
				webhook_key bench-webhook-key
				link_clients records
				upstream {
					rate_limit %s
				}
			}
			documents sharepoint {
				drive_id %s
				access_token %s
				base_url %s
				root /Clients
				link_clients records
			}
		}
`, id, id, v.k.AccessKey, v.k.Bearer, v.k.URL, karbonLimit, v.x.TenantID, v.x.Token, v.x.URL, xeroLimit,
		v.g.DriveID, v.g.Token, v.g.URL)
}

// caddyfile is the gateway: the firms' blocks, then the site as the
// example configuration serves it.
func caddyfile(blocks ...string) string {
	return `{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
` + strings.Join(blocks, "") + `		firm frm_demo {
			name "Bench demo"
			records demo
			documents demo
			ledger demo
		}
	}
}

http://{$PRACTICEGW_LISTEN} {
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	handle /v1/openapi.json {
		practicegw_api
	}
	handle /v1/* {
		practicegw_auth
		practicegw_ratelimit
		practicegw_api
	}
	handle {
		practicegw_api
	}
}
`
}
