package demo

import (
	"fmt"
	"math/rand/v2"
	"net/url"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/proposals"
	"github.com/practicegw/practicegw/practice"
)

// gen makes realistic records. The seed drives it from a PCG seeded by the
// firm id, with times in the past; triggers drive it from a fresh random
// source, with the current time. Both make records the same way, so a
// triggered client looks like a seeded one.
type gen struct {
	rng *rand.Rand
	st  *style
	id  func(k practice.Kind, at time.Time) string
	// now is the present as the records see it: the seed's base time, or
	// the clock for a trigger. Deadlines are placed around it.
	now time.Time
	// usedNames keeps seeded names unique; nil lets names repeat.
	usedNames map[string]bool
}

func (g *gen) person(role string, created time.Time) practice.Person {
	first, last := g.uniqueName()
	return practice.Person{
		ID:        g.id(practice.People, created),
		Object:    practice.People.Singular(),
		Name:      first + " " + last,
		Email:     practice.Known(emailLocal(first, last) + "@" + g.st.domain),
		Role:      role,
		Active:    true,
		CreatedAt: &created,
		UpdatedAt: created,
	}
}

func (g *gen) uniqueName() (first, last string) {
	for range 50 {
		first, last = pick(g.rng, g.st.firstNames), pick(g.rng, g.st.lastNames)
		if g.claim(first + " " + last) {
			break
		}
	}
	return first, last
}

// claim reports whether name was free, and takes it.
func (g *gen) claim(name string) bool {
	if g.usedNames == nil {
		return true
	}
	if g.usedNames[name] {
		return false
	}
	g.usedNames[name] = true
	return true
}

// client makes a client with one primary contact and up to three others.
// All its times are created; the seed moves them later.
func (g *gen) client(typ, status, owner string, created time.Time) practice.Client {
	cat := category(typ)
	var name, first, last string
	for range 50 {
		first, last = pick(g.rng, g.st.firstNames), pick(g.rng, g.st.lastNames)
		name = fill(pick(g.rng, g.st.clientNames[cat]), "{first}", first, "{last}", last,
			"{last2}", pick(g.rng, g.st.lastNames), "{brand}", pick(g.rng, brandWords),
			"{trade}", pick(g.rng, tradeWords), "{town}", pick(g.rng, g.st.towns))
		if g.claim(name) {
			break
		}
	}
	c := practice.Client{
		ID:             g.id(practice.Clients, created),
		Object:         practice.Clients.Singular(),
		Name:           name,
		Type:           typ,
		Status:         status,
		Owner:          practice.Known(owner),
		Phone:          g.st.phone(g.rng),
		Country:        g.st.code,
		LastActivityAt: created,
		CreatedAt:      &created,
		UpdatedAt:      created,
	}
	domain := pick(g.rng, g.st.mailHosts)
	if cat == individual {
		c.Email = emailLocal(first, last) + "@" + domain
	} else {
		domain = businessDomain(name) + "." + g.st.tld
		c.Email = pick(g.rng, []string{"accounts", "info", "office", "finance"}) + "@" + domain
	}

	n := pickWeighted(g.rng, []weighted[int]{{1, 30}, {2, 35}, {3, 25}, {4, 10}})
	roles := append([]string(nil), contactRoles[cat]...)
	g.rng.Shuffle(len(roles), func(i, j int) { roles[i], roles[j] = roles[j], roles[i] })
	roles = roles[:min(n-1, len(roles))]

	primaryFirst, primaryLast := pick(g.rng, g.st.firstNames), pick(g.rng, g.st.lastNames)
	if cat == individual {
		primaryFirst, primaryLast = first, last
	}
	c.Contacts = append(c.Contacts, g.contact(primaryFirst, primaryLast, "primary", domain))
	for _, role := range roles {
		f, l := pick(g.rng, g.st.firstNames), pick(g.rng, g.st.lastNames)
		if role == "spouse" {
			l = last
		}
		c.Contacts = append(c.Contacts, g.contact(f, l, role, domain))
	}
	return c
}

func (g *gen) contact(first, last, role, domain string) practice.Contact {
	ct := practice.Contact{Name: first + " " + last, Role: role, Email: emailLocal(first, last) + "@" + domain}
	if g.rng.IntN(10) < 6 {
		ct.Phone = g.st.phone(g.rng)
	}
	return ct
}

// engagement proposes an engagement to c, with its letter. It has the
// shape the firms' proposal systems give (kit/proposals): the scope is a
// quote's title and tasks, billing fixed or an estimate, no released jobs
// (no vendor links a job to its quote), and no letter named: the letter
// is a document of the client's store, which names no engagement, linked
// as the engagement is read by the rule real letters are (tenant.linked).
func (g *gen) engagement(c *practice.Client, created time.Time) (practice.Engagement, practice.Document) {
	cat := category(c.Type)
	id := g.id(practice.Engagements, created)
	letter := g.document(c, practice.LetterKind, "", created)
	// The year in hand: until spring, practices still work on last year.
	year := created.AddDate(0, -4, 0).Year()
	quote := strings.Split(fill(pick(g.rng, g.st.scopes[cat]), "{year}", strconv.Itoa(year),
		"{yy}", fmt.Sprintf("%02d", (year+1)%100), "{next}", strconv.Itoa(year+1)), "|")
	scope := proposals.Scope(quote[0], quote[1:])

	billing := pickWeighted(g.rng, []weighted[string]{{"fixed", 45}, {"monthly", 40}, {"hourly", 15}})
	if cat == individual {
		billing = pickWeighted(g.rng, []weighted[string]{{"fixed", 80}, {"monthly", 10}, {"hourly", 10}})
	}
	var fee int64 // minor units
	switch {
	case billing == "hourly":
		fee = int64(95+5*g.rng.IntN(47)) * 100
	case billing == "monthly" && cat == individual:
		fee = int64(40+5*g.rng.IntN(43)) * 100
	case billing == "monthly":
		fee = int64(150+25*g.rng.IntN(67)) * 100
	case cat == individual:
		fee = int64(350+50*g.rng.IntN(42)) * 100
	default:
		fee = int64(1200+50*g.rng.IntN(257)) * 100
	}
	// A quote is a total: a monthly fee quoted for the year, work billed
	// by the hour quoted as an estimate of its hours (XPM's estimates).
	switch billing {
	case "monthly":
		billing, fee = "fixed", fee*12
	case "hourly":
		billing, fee = "estimate", fee*20
	}
	return practice.Engagement{
		ID:           id,
		Object:       practice.Engagements.Singular(),
		Client:       practice.Known(c.ID),
		Status:       "proposed",
		Scope:        scope,
		Fee:          practice.MinorUnits(fee, g.st.currency),
		Billing:      billing,
		ReleasedJobs: []string{},
		CreatedAt:    &created,
		UpdatedAt:    created,
	}, letter
}

// sign records the client's signature on e and returns the signed letter,
// which names no engagement either.
func (g *gen) sign(e *practice.Engagement, c *practice.Client, at time.Time) practice.Document {
	signed := g.document(c, practice.SignedLetterKind, "", at)
	e.Status = "signed"
	e.SignedAt = &at
	e.UpdatedAt = at
	return signed
}

// job makes a job of a type that suits the client and its stage: finished
// statutory work is for a deadline that has passed. Closed jobs get no
// closed_at here: the caller knows when they closed.
func (g *gen) job(c *practice.Client, engagement, stage string, created time.Time) practice.Job {
	types := g.st.jobTypes[category(c.Type)]
	jt := pick(g.rng, types)
	for range 5 {
		if len(jt.deadlines) == 0 || len(g.fixedDeadlines(jt, stage)) > 0 {
			break
		}
		jt = pick(g.rng, types)
	}
	return practice.Job{
		ID:         g.id(practice.Jobs, created),
		Object:     practice.Jobs.Singular(),
		Title:      jt.name + " - " + c.Name,
		Type:       jt.name,
		Client:     practice.Known(c.ID),
		Engagement: engagement,
		Owner:      c.Owner,
		Stage:      stage,
		Deadline:   g.deadline(jt, stage, created),
		CreatedAt:  &created,
		UpdatedAt:  created,
	}
}

var (
	firstDeadline = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	lastDeadline  = time.Date(2027, 12, 31, 0, 0, 0, 0, time.UTC)
)

// done reports whether a job in stage has met its deadline.
func done(stage string) bool { return practice.ClosedStage(stage) || stage == "filed" }

// fixedDeadlines are the statutory deadlines of jt that suit a job in
// stage: passed for finished work, ahead or only just missed for open work.
func (g *gen) fixedDeadlines(jt jobType, stage string) []string {
	today, cut := g.now.Format(time.DateOnly), g.now.AddDate(0, 0, -60).Format(time.DateOnly)
	var fit []string
	for _, d := range jt.deadlines {
		if done(stage) && d < today || !done(stage) && d >= cut {
			fit = append(fit, d)
		}
	}
	return fit
}

// deadline puts finished work's deadline behind g.now and open work's
// mostly ahead of it, within 2025-2027.
func (g *gen) deadline(jt jobType, stage string, created time.Time) string {
	if len(jt.deadlines) > 0 {
		if fit := g.fixedDeadlines(jt, stage); len(fit) > 0 {
			return pick(g.rng, fit)
		}
		return pick(g.rng, jt.deadlines)
	}
	var d time.Time
	if done(stage) {
		d = created.AddDate(0, 0, 14+g.rng.IntN(140))
	} else {
		d = g.now.AddDate(0, 0, -45+g.rng.IntN(560))
	}
	return earliest(latest(d, firstDeadline), lastDeadline).Format(time.DateOnly)
}

// document makes a document of kind for c, filed in the firm's store.
func (g *gen) document(c *practice.Client, kind, engagement string, created time.Time) practice.Document {
	year := created.Year()
	var folder, tmpl string
	switch kind {
	case "proposal":
		folder, tmpl = "Proposals", "Proposal {year} - {client}.pdf"
	case "engagement_letter":
		folder, tmpl = "Engagement letters", "Engagement letter {year} - {client}.pdf"
	case "signed_engagement_letter":
		folder, tmpl = "Engagement letters", "Engagement letter {year} - {client} (signed).pdf"
	case "identity_verification":
		folder, tmpl = "Identity", pick(g.rng, g.st.identityDocs)
	case "source_document":
		folder, tmpl, year = "Source documents", pick(g.rng, g.st.sourceDocs), year-1
	case "working_paper":
		folder, tmpl, year = "Working papers", pick(g.rng, workingPapers), year-1
	case "financial_statements":
		folder, tmpl, year = "Accounts", pick(g.rng, statements), year-1
	case "tax_return":
		folder, tmpl, year = "Tax return", pick(g.rng, g.st.taxDocs), year-1
	case "correspondence":
		folder, tmpl = "Correspondence", pick(g.rng, g.st.correspondence)
	default:
		folder, tmpl = "Other", pick(g.rng, otherDocs)
	}
	contact := c.Name
	if len(c.Contacts) > 0 {
		contact = pick(g.rng, c.Contacts).Name
	}
	name := fill(tmpl, "{year}", strconv.Itoa(year), "{yy}", fmt.Sprintf("%02d", (year+1)%100),
		"{month}", pick(g.rng, months), "{q}", strconv.Itoa(1+g.rng.IntN(4)),
		"{date}", created.Format(time.DateOnly), "{client}", c.Name, "{contact}", contact)
	clientFolder := strings.ReplaceAll(c.Name, "/", "-")
	dir := "/Clients/" + clientFolder + "/" + strconv.Itoa(year) + "/" + folder + "/"
	mime, size := fileType(g.rng, path.Ext(name))
	return practice.Document{
		ID:         g.id(practice.Documents, created),
		Object:     practice.Documents.Singular(),
		Name:       name,
		Kind:       kind,
		Client:     practice.Known(c.ID),
		Engagement: engagement,
		MimeType:   mime,
		SizeBytes:  size,
		Location:   g.location(dir, []string{clientFolder, strconv.Itoa(year), folder, name}),
		FiledAt:    created,
		CreatedAt:  created,
		UpdatedAt:  created,
	}
}

// location points at a file in the firm's store, with ids shaped like the
// store's own.
func (g *gen) location(dir string, segments []string) practice.Location {
	escaped := make([]string, len(segments))
	for i, s := range segments {
		escaped[i] = url.PathEscape(s)
	}
	loc := practice.Location{Provider: g.st.provider, Path: dir}
	switch g.st.provider {
	case "sharepoint":
		loc.ItemID = "01" + randomString(g.rng, base32Std, 32)
		loc.DriveID = g.st.driveID
		loc.WebURL = "https://" + g.st.slug + ".sharepoint.com/sites/Clients/Shared%20Documents/" + strings.Join(escaped, "/")
	case "google_drive":
		loc.ItemID = "1" + randomString(g.rng, base64URL, 32)
		loc.DriveID = g.st.driveID
		loc.WebURL = "https://drive.google.com/file/d/" + loc.ItemID + "/view"
	default:
		loc.ItemID = "id:" + randomString(g.rng, base64URL, 22)
		loc.WebURL = "https://www.dropbox.com/home/Clients/" + strings.Join(escaped, "/")
	}
	return loc
}

func fileType(r *rand.Rand, ext string) (mime string, size int64) {
	kb := func(lo, hi int) int64 { return int64(lo*1024 + r.IntN((hi-lo)*1024)) }
	switch ext {
	case ".xlsx":
		return "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet", kb(14, 900)
	case ".docx":
		return "application/vnd.openxmlformats-officedocument.wordprocessingml.document", kb(12, 320)
	case ".eml":
		return "message/rfc822", kb(4, 220)
	case ".jpg":
		return "image/jpeg", kb(180, 4800)
	}
	return "application/pdf", kb(38, 3900)
}

// invoice makes an invoice in status; paid invoices go through pay.
func (g *gen) invoice(c *practice.Client, number int, status string, created time.Time) practice.Invoice {
	var total int64
	if category(c.Type) == individual {
		total = int64(150_00 + g.rng.IntN(1650_00))
	} else {
		total = int64(250_00 + g.rng.IntN(7750_00))
	}
	inv := practice.Invoice{
		ID:        g.id(practice.Invoices, created),
		Object:    practice.Invoices.Singular(),
		Number:    practice.Known(fmt.Sprintf("INV-%06d", number)),
		Client:    practice.Known(c.ID),
		Status:    status,
		Total:     practice.MinorUnits(total, g.st.currency),
		AmountDue: practice.MinorUnits(total, g.st.currency),
		CreatedAt: &created,
		UpdatedAt: created,
	}
	if status != "draft" && status != "awaiting_approval" {
		inv.IssuedOn = created.Format(time.DateOnly)
		inv.DueOn = created.AddDate(0, 0, g.st.paymentDue).Format(time.DateOnly)
	}
	switch status {
	case "void":
		inv.AmountDue = practice.MinorUnits(0, g.st.currency)
	case "partially_paid":
		inv.AmountDue = practice.MinorUnits(total*int64(20+g.rng.IntN(61))/100, g.st.currency)
	}
	return inv
}

// pay settles inv in full at at.
func (g *gen) pay(inv *practice.Invoice, at time.Time) {
	inv.Status = "paid"
	inv.AmountDue = practice.MinorUnits(0, inv.Total.Currency)
	inv.PaidAt = &at
	inv.SettledVia = pickWeighted(g.rng, g.st.rails)
	inv.UpdatedAt = at
}

// fill replaces {placeholders} in a template; pairs are old, new.
func fill(tmpl string, pairs ...string) string {
	return strings.NewReplacer(pairs...).Replace(tmpl)
}

func emailLocal(first, last string) string {
	return slugify(first) + "." + slugify(last)
}

// businessDomain makes a web domain from the distinctive words of a
// business name: "Harbour Joinery Ltd" gives harbourjoinery.
func businessDomain(name string) string {
	var words []string
	for _, w := range strings.Fields(name) {
		switch w {
		case "&", "Ltd", "LLP", "Inc.", "LLC", "Pty", "LP", "The", "of", "Group", "Services":
			continue
		}
		if words = append(words, slugify(w)); len(words) == 3 {
			break
		}
	}
	return strings.Join(words, "")
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// ref is a reference to id of its own: the record keeps it whatever
// becomes of the client it was read from.
func ref(id string) *string { return &id }
