package demo

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Seed sizes per tenant.
const (
	seedClients     = 260
	seedEngagements = 300
	seedJobs        = 1000
	seedDocuments   = 2000
	seedInvoices    = 1500
)

// seedBase is the moment the seed is taken. Every seeded time lies before
// it, so the seed depends on the firm id alone, never on when it runs.
var seedBase = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// staffing is a seeded firm's people: how many of each role, and how many
// days before seedBase they joined.
var staffing = []struct {
	role           string
	count          int
	joinedFrom, to int
}{
	{"partner", 4, 3600, 2400},
	{"manager", 5, 2600, 900},
	{"senior", 7, 1800, 300},
	{"associate", 6, 900, 60},
	{"admin", 3, 2000, 100},
}

var (
	clientTypeWeights   = []weighted[string]{{"individual", 32}, {"company", 44}, {"partnership", 9}, {"trust", 8}, {"charity", 7}}
	clientStatusWeights = []weighted[string]{{"active", 78}, {"prospect", 6}, {"inactive", 10}, {"archived", 6}}
	jobStageWeights     = []weighted[string]{{"planned", 12}, {"ready_to_start", 8}, {"awaiting_client", 10},
		{"in_progress", 16}, {"in_review", 8}, {"awaiting_client_approval", 6}, {"filed", 6}, {"completed", 30}, {"cancelled", 4}}
	closedStageWeights  = []weighted[string]{{"completed", 85}, {"cancelled", 15}}
	documentKindWeights = []weighted[string]{{"source_document", 35}, {"working_paper", 18}, {"tax_return", 15},
		{"correspondence", 14}, {"financial_statements", 8}, {"identity_verification", 6}, {"other", 4}}
)

// record is one seeded record, encoded.
type record struct {
	id  string
	raw json.RawMessage
}

// seedOf derives a PCG seed from a firm id and a purpose.
func seedOf(firm, purpose string) (uint64, uint64) {
	sum := sha256.Sum256([]byte(firm + "\x00" + purpose))
	return binary.BigEndian.Uint64(sum[:8]), binary.BigEndian.Uint64(sum[8:16])
}

// generate makes a tenant's seed, each kind sorted by id, in the order of
// practice.Kinds. Live and sandbox draw from different seeds, so they share
// no ids.
func generate(t practice.Tenant, st *style) ([numKinds][]record, error) {
	s := &seeder{gen: gen{
		rng:       rand.New(rand.NewPCG(seedOf(t.Firm, mode(t.Sandbox)))),
		st:        st,
		now:       seedBase,
		usedNames: map[string]bool{},
	}}
	s.id = s.seedID
	s.addPeople()
	s.addClients()
	s.addEngagements()
	s.addJobs()
	s.addDocuments()
	s.addInvoices()
	return s.encode()
}

// seeder builds one tenant's seed. Links between records are by slice
// index while building, so that no map is ever iterated and the output
// cannot depend on hash order.
type seeder struct {
	gen
	people     []practice.Person
	clients    []practice.Client
	engs       []practice.Engagement
	jobs       []practice.Job
	docs       []practice.Document
	invoices   []practice.Invoice
	owners     []string // active partners and managers: they own clients
	staff      []string // active fee earners: they run jobs
	engClient  []int    // per engagement: its client's index
	clientEngs [][]int  // per client: its signed or ended engagements
	billable   []int    // client indexes with work, active ones thrice
}

// seedID makes a seeded id: the time is the record's creation time, the
// random part comes from the seed.
func (s *seeder) seedID(k practice.Kind, at time.Time) string {
	var e [10]byte
	binary.BigEndian.PutUint64(e[:8], s.rng.Uint64())
	binary.BigEndian.PutUint16(e[8:], uint16(s.rng.Uint32()))
	return formatID(k.IDPrefix(), uint64(at.UnixMilli()), e)
}

// between returns a whole second in [a, b), moved into office hours on a
// weekday when that still fits: people sign, file and bill at work.
func (s *seeder) between(a, b time.Time) time.Time {
	secs := int64(b.Sub(a) / time.Second)
	if secs <= 0 {
		return a
	}
	t := a.Add(time.Duration(s.rng.Int64N(secs)) * time.Second)
	day := t.Truncate(24 * time.Hour)
	switch day.Weekday() {
	case time.Saturday:
		day = day.AddDate(0, 0, -1)
	case time.Sunday:
		day = day.AddDate(0, 0, 1)
	}
	w := day.Add(8*time.Hour + time.Duration(s.rng.IntN(11*3600))*time.Second)
	if w.Before(a) || !w.Before(b) {
		return t
	}
	return w
}

func (s *seeder) daysAgo(from, to int) time.Time {
	return s.between(seedBase.AddDate(0, 0, -from), seedBase.AddDate(0, 0, -to))
}

func (s *seeder) addPeople() {
	for _, group := range staffing {
		for range group.count {
			p := s.person(group.role, s.daysAgo(group.joinedFrom, group.to))
			p.UpdatedAt = s.between(*p.CreatedAt, seedBase)
			if (group.role == "senior" || group.role == "associate") && s.rng.IntN(8) == 0 {
				p.Active = false
			}
			s.people = append(s.people, p)
			switch {
			case !p.Active || p.Role == "admin":
			case p.Role == "partner" || p.Role == "manager":
				s.owners = append(s.owners, p.ID)
				s.staff = append(s.staff, p.ID)
			default:
				s.staff = append(s.staff, p.ID)
			}
		}
	}
}

func (s *seeder) addClients() {
	for range seedClients {
		typ := pickWeighted(s.rng, clientTypeWeights)
		status := pickWeighted(s.rng, clientStatusWeights)
		created := s.daysAgo(2400, 90)
		if status == "prospect" {
			created = s.daysAgo(200, 5)
		}
		c := s.client(typ, status, pick(s.rng, s.owners), created)
		// Last activity falls in the last 18 months; clients that have gone
		// quiet stopped some months ago.
		from := latest(created, seedBase.AddDate(0, 0, -548))
		to := seedBase
		if status == "inactive" || status == "archived" {
			to = seedBase.AddDate(0, 0, -120)
		}
		c.LastActivityAt = s.between(from, to)
		c.UpdatedAt = s.between(created, c.LastActivityAt)
		s.clients = append(s.clients, c)
	}
	s.clientEngs = make([][]int, len(s.clients))
	for i, c := range s.clients {
		switch c.Status {
		case "active":
			s.billable = append(s.billable, i, i, i)
		case "inactive", "archived":
			s.billable = append(s.billable, i)
		}
	}
}

// until is when a client's work stops: now, or its last activity for
// clients that have gone quiet.
func (s *seeder) until(c *practice.Client) time.Time {
	if c.Status == "inactive" || c.Status == "archived" {
		return c.LastActivityAt
	}
	return seedBase
}

// addEngagements gives every current client a letter, then spreads the
// rest over clients with work.
func (s *seeder) addEngagements() {
	for i := range s.clients {
		if s.clients[i].Status != "archived" {
			s.addEngagement(i)
		}
	}
	for len(s.engs) < seedEngagements {
		s.addEngagement(pick(s.rng, s.billable))
	}
}

func (s *seeder) addEngagement(ci int) {
	c := &s.clients[ci]
	var status string
	switch c.Status {
	case "prospect":
		status = pickWeighted(s.rng, []weighted[string]{{"proposed", 40}, {"sent", 40}, {"declined", 20}})
	case "active":
		status = pickWeighted(s.rng, []weighted[string]{{"signed", 80}, {"proposed", 5}, {"sent", 5}, {"declined", 3}, {"ended", 7}})
	default:
		status = pickWeighted(s.rng, []weighted[string]{{"ended", 70}, {"signed", 20}, {"declined", 10}})
	}
	from, to := *c.CreatedAt, s.until(c).AddDate(0, 0, -3)
	switch {
	case status == "proposed" || status == "sent":
		// Proposals still open are recent.
		from, to = latest(from, seedBase.AddDate(0, 0, -60)), seedBase
	case status == "signed" && c.Status == "active":
		// Current letters are renewed every year or two.
		from = latest(from, seedBase.AddDate(0, 0, -700))
	}
	created := s.between(from, to)
	e, letter := s.engagement(c, created)
	s.docs = append(s.docs, letter)
	if s.rng.IntN(10) < 4 {
		// Some letters follow a written proposal, filed shortly before.
		proposed := s.between(latest(*c.CreatedAt, created.AddDate(0, 0, -14)), created)
		s.docs = append(s.docs, s.document(c, "proposal", "", proposed))
	}
	switch status {
	case "sent", "declined":
		e.Status = status
		e.UpdatedAt = s.between(created, earliest(created.AddDate(0, 0, 30), seedBase))
	case "signed", "ended":
		signedAt := s.between(created.Add(time.Hour), earliest(created.AddDate(0, 0, 21), s.until(c)))
		s.docs = append(s.docs, s.sign(&e, c, signedAt))
		if status == "ended" {
			e.Status = status
			e.UpdatedAt = s.between(signedAt, seedBase)
		}
		s.clientEngs[ci] = append(s.clientEngs[ci], len(s.engs))
	}
	s.engs = append(s.engs, e)
	s.engClient = append(s.engClient, ci)
}

// addJobs releases one to three jobs for every signed engagement, then adds
// work for clients with and without an engagement behind it.
func (s *seeder) addJobs() {
	for ei := range s.engs {
		if s.engs[ei].SignedAt == nil {
			continue
		}
		for range pickWeighted(s.rng, []weighted[int]{{1, 40}, {2, 40}, {3, 20}}) {
			if len(s.jobs) < seedJobs {
				s.addJob(s.engClient[ei], ei)
			}
		}
	}
	for len(s.jobs) < seedJobs {
		ci, ei := pick(s.rng, s.billable), -1
		if engs := s.clientEngs[ci]; len(engs) > 0 && s.rng.IntN(2) == 0 {
			ei = pick(s.rng, engs)
		}
		s.addJob(ci, ei)
	}
}

func (s *seeder) addJob(ci, ei int) {
	c := &s.clients[ci]
	to := s.until(c)
	from := latest(*c.CreatedAt, earliest(seedBase.AddDate(0, 0, -540), to.AddDate(0, 0, -365)))
	engagement := ""
	stage := pickWeighted(s.rng, jobStageWeights)
	if c.Status != "active" {
		stage = pickWeighted(s.rng, closedStageWeights)
	}
	if ei >= 0 {
		e := &s.engs[ei]
		engagement, from = e.ID, latest(from, *e.SignedAt)
		if e.Status == "ended" {
			stage = pickWeighted(s.rng, closedStageWeights)
		}
	}
	// A client that went quiet within hours of signing leaves no window.
	from = earliest(from, to)
	closing := practice.ClosedStage(stage)
	created := s.between(from, to)
	if closing {
		// Closed work took a few weeks at least.
		created = s.between(from, to.AddDate(0, 0, -21))
	}
	j := s.job(c, engagement, stage, created)
	if s.rng.IntN(10) < 3 {
		j.Owner = practice.Known(pick(s.rng, s.staff))
	}
	j.UpdatedAt = s.between(created, to)
	if closing {
		closed := s.between(earliest(created.AddDate(0, 0, 7), to), to)
		j.ClosedAt, j.UpdatedAt = &closed, closed
	}
	s.jobs = append(s.jobs, j)
}

// addDocuments fills up to the seed size with the working documents of
// clients with work; letters and proposals came with their engagements.
func (s *seeder) addDocuments() {
	for len(s.docs) < seedDocuments {
		c := &s.clients[pick(s.rng, s.billable)]
		created := s.between(latest(*c.CreatedAt, seedBase.AddDate(0, 0, -900)), s.until(c))
		s.docs = append(s.docs, s.document(c, pickWeighted(s.rng, documentKindWeights), "", created))
	}
}

// addInvoices bills clients with work over the last two years. Recent
// invoices are still open; older ones are mostly paid.
func (s *seeder) addInvoices() {
	for range seedInvoices {
		c := &s.clients[pick(s.rng, s.billable)]
		created := s.between(latest(*c.CreatedAt, seedBase.AddDate(0, 0, -730)), s.until(c))
		var status string
		switch age := seedBase.Sub(created); {
		case age < 45*24*time.Hour:
			status = pickWeighted(s.rng, []weighted[string]{{"draft", 12}, {"awaiting_approval", 8}, {"issued", 50}, {"partially_paid", 5}, {"paid", 25}})
		case age < 120*24*time.Hour:
			status = pickWeighted(s.rng, []weighted[string]{{"issued", 25}, {"partially_paid", 8}, {"paid", 62}, {"void", 5}})
		default:
			status = pickWeighted(s.rng, []weighted[string]{{"issued", 3}, {"partially_paid", 3}, {"paid", 88}, {"void", 6}})
		}
		// Numbers follow creation order; they are given once sorted.
		inv := s.invoice(c, 0, status, created)
		switch status {
		case "paid":
			s.pay(&inv, s.between(created, earliest(created.AddDate(0, 0, s.st.paymentDue+25), seedBase)))
		case "void":
			inv.UpdatedAt = s.between(created, earliest(created.AddDate(0, 0, 20), seedBase))
		case "issued", "partially_paid":
			inv.UpdatedAt = s.between(created, seedBase)
		}
		s.invoices = append(s.invoices, inv)
	}
}

func (s *seeder) encode() ([numKinds][]record, error) {
	byID := func(a, b string) int { return strings.Compare(a, b) }
	slices.SortFunc(s.people, func(a, b practice.Person) int { return byID(a.ID, b.ID) })
	slices.SortFunc(s.clients, func(a, b practice.Client) int { return byID(a.ID, b.ID) })
	slices.SortFunc(s.engs, func(a, b practice.Engagement) int { return byID(a.ID, b.ID) })
	slices.SortFunc(s.jobs, func(a, b practice.Job) int { return byID(a.ID, b.ID) })
	slices.SortFunc(s.docs, func(a, b practice.Document) int { return byID(a.ID, b.ID) })
	slices.SortFunc(s.invoices, func(a, b practice.Invoice) int { return byID(a.ID, b.ID) })
	first := 1000 + s.rng.IntN(3000)
	for i := range s.invoices {
		s.invoices[i].Number = practice.Known(fmt.Sprintf("INV-%06d", first+i))
	}

	var set [numKinds][]record
	var err error
	add := func(k practice.Kind, id string, v any) {
		if err != nil {
			return
		}
		var raw json.RawMessage
		// Seeded records are each one's first version.
		if raw, err = practice.Marshal(withVersion(v, 1)); err == nil {
			ki, _ := kindIndex(k)
			set[ki] = append(set[ki], record{id, raw})
		}
	}
	for _, v := range s.clients {
		add(practice.Clients, v.ID, v)
	}
	for _, v := range s.engs {
		add(practice.Engagements, v.ID, v)
	}
	for _, v := range s.jobs {
		add(practice.Jobs, v.ID, v)
	}
	for _, v := range s.docs {
		add(practice.Documents, v.ID, v)
	}
	for _, v := range s.invoices {
		add(practice.Invoices, v.ID, v)
	}
	for _, v := range s.people {
		add(practice.People, v.ID, v)
	}
	return set, err
}
