package demo

import (
	"context"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// triggerEvents are the event kinds Trigger can raise.
var triggerEvents = []string{"client.created", "client.updated", "engagement.created", "engagement.signed",
	"engagement_letter.signed", "job.opened", "job.stage_changed", "job.closed", "document.filed",
	"invoice.raised", "invoice.paid"}

// Trigger makes one realistic change to a firm's sandbox records that
// raises the event kind, stores it like any write, and returns the change
// that raises it. A trigger may store further changes in the same
// transaction, as the real process would: signing an engagement also files
// the signed letter and opens the jobs it releases.
func (r *Records) Trigger(ctx context.Context, firm, event string) (practice.Change, error) {
	if !slices.Contains(triggerEvents, event) {
		// Removal kinds are kinds, but the sandbox's records are never
		// removed, so nothing here can raise one.
		return practice.Change{}, practice.Invalid("event", "%q is not an event kind the sandbox raises; use one of %s.",
			event, strings.Join(triggerEvents, ", "))
	}
	w, done, err := r.begin(practice.Tenant{Firm: firm, Sandbox: true})
	if err != nil {
		return practice.Change{}, err
	}
	defer done()
	tr := &trigger{write: w, g: &gen{
		rng: rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
		st:  w.ts.style,
		id:  func(k practice.Kind, at time.Time) string { return r.ids.next(k.IDPrefix(), at) },
		now: w.now,
	}}

	switch event {
	case "client.created":
		err = tr.createClient()
	case "client.updated":
		err = tr.updateClient()
	case "engagement.created":
		_, _, err = tr.proposeEngagement()
	case "engagement.signed", "engagement_letter.signed":
		err = tr.signEngagement()
	case "job.opened":
		err = tr.openJob()
	case "job.stage_changed":
		err = tr.advanceJob()
	case "job.closed":
		err = tr.closeJob()
	case "document.filed":
		err = tr.fileDocument()
	case "invoice.raised":
		_, err = tr.raiseInvoice()
	case "invoice.paid":
		err = tr.payInvoice()
	}
	if err != nil {
		return practice.Change{}, err
	}
	// The number is taken before the commit, while the write lock is
	// held: a write that then fails leaves a gap, as a real ledger's
	// voided draft would.
	w.ts.lastInvoice = max(w.ts.lastInvoice, tr.lastInvoice)
	changes, err := r.commit(ctx, w)
	if err != nil {
		return practice.Change{}, err
	}
	// Every trigger stores the record that raises the event last.
	return changes[len(changes)-1], nil
}

// trigger is one Trigger call: a write and a generator for its records.
type trigger struct {
	*write
	g           *gen
	lastInvoice int // the invoice number this trigger gave out, if any
}

// pick loads a random record of kind k that satisfies ok into v.
func (tr *trigger) pick(k practice.Kind, ok func(*entry) bool, v any) (json.RawMessage, bool, error) {
	col := tr.ts.col(k)
	var fit []int
	for i := range col {
		if ok(&col[i]) {
			fit = append(fit, i)
		}
	}
	if len(fit) == 0 {
		return nil, false, nil
	}
	before, err := tr.load(k, col[pick(tr.g.rng, fit)].ID, v)
	return before, err == nil, err
}

// client picks a random client, preferring active ones.
func (tr *trigger) client() (practice.Client, json.RawMessage, error) {
	var c practice.Client
	for _, ok := range []func(*entry) bool{
		func(e *entry) bool { return e.Status == "active" },
		func(*entry) bool { return true },
	} {
		if raw, found, err := tr.pick(practice.Clients, ok, &c); found || err != nil {
			return c, raw, err
		}
	}
	return c, nil, errors.New("demo: the sandbox has no clients")
}

func (tr *trigger) createClient() error {
	typ := pickWeighted(tr.g.rng, clientTypeWeights)
	_, err := tr.put(practice.Clients, nil, tr.g.client(typ, "active", pick(tr.g.rng, tr.ts.owners), tr.now), "")
	return err
}

// updateClient makes one of the edits a practice makes every day.
func (tr *trigger) updateClient() error {
	c, before, err := tr.client()
	if err != nil {
		return err
	}
	switch tr.g.rng.IntN(3) {
	case 0:
		c.Phone = tr.g.st.phone(tr.g.rng)
	case 1:
		_, domain, _ := strings.Cut(c.Email, "@")
		billing := tr.g.contact(pick(tr.g.rng, tr.g.st.firstNames), pick(tr.g.rng, tr.g.st.lastNames), "billing", domain)
		c.Contacts = append(slices.DeleteFunc(c.Contacts, func(ct practice.Contact) bool { return ct.Role == "billing" }), billing)
	default:
		others := slices.DeleteFunc(slices.Clone(tr.ts.owners), func(id string) bool { return id == c.Owner })
		if len(others) > 0 {
			c.Owner = pick(tr.g.rng, others)
		}
	}
	c.UpdatedAt, c.LastActivityAt = tr.now, tr.now
	_, err = tr.put(practice.Clients, before, c, "")
	return err
}

// proposeEngagement proposes an engagement to a client, with its letter.
func (tr *trigger) proposeEngagement() (practice.Engagement, practice.Client, error) {
	c, _, err := tr.client()
	if err != nil {
		return practice.Engagement{}, c, err
	}
	e, letter := tr.g.engagement(&c, tr.now)
	if _, err := tr.put(practice.Documents, nil, letter, ""); err != nil {
		return e, c, err
	}

	_, err = tr.put(practice.Engagements, nil, e, "")
	return e, c, err
}

// signEngagement signs an open proposal, proposing one first if none is
// open. Signing files the signed letter and opens one or two jobs, which
// the engagement does not list: no proposal system links its jobs.
func (tr *trigger) signEngagement() error {
	var e practice.Engagement
	var c practice.Client
	before, found, err := tr.pick(practice.Engagements, func(x *entry) bool {
		return x.Status == "proposed" || x.Status == "sent"
	}, &e)
	switch {
	case err != nil:
		return err
	case found:
		_, err = tr.load(practice.Clients, practice.IDOf(e.Client), &c)
	default:
		e, c, err = tr.proposeEngagement()
		before = tr.pending[len(tr.pending)-1].entry.Raw
	}
	if err != nil {
		return err
	}
	if _, err := tr.put(practice.Documents, nil, tr.g.sign(&e, &c, tr.now), ""); err != nil {
		return err
	}
	for range 1 + tr.g.rng.IntN(2) {
		j := tr.g.job(&c, e.ID, "planned", tr.now)
		if _, err := tr.put(practice.Jobs, nil, j, ""); err != nil {
			return err
		}
	}
	_, err = tr.put(practice.Engagements, before, e, "")
	return err
}

func (tr *trigger) openJob() error {
	_, _, err := tr.newJob()
	return err
}

func (tr *trigger) newJob() (practice.Job, json.RawMessage, error) {
	c, _, err := tr.client()
	if err != nil {
		return practice.Job{}, nil, err
	}
	j := tr.g.job(&c, "", "planned", tr.now)
	raw, err := tr.put(practice.Jobs, nil, j, "")
	return j, raw, err
}

// jobFor picks a job in one of stages, or opens one when none is.
func (tr *trigger) jobFor(stages []string) (practice.Job, json.RawMessage, error) {
	var j practice.Job
	before, found, err := tr.pick(practice.Jobs, func(e *entry) bool { return slices.Contains(stages, e.Stage) }, &j)
	if err != nil || found {
		return j, before, err
	}
	return tr.newJob()
}

// advanceJob moves a job one stage on, short of closing it.
func (tr *trigger) advanceJob() error {
	filed := slices.Index(practice.JobStages, "filed")
	j, before, err := tr.jobFor(practice.JobStages[:filed])
	if err != nil {
		return err
	}
	return tr.move(j, before, practice.JobStages[slices.Index(practice.JobStages, j.Stage)+1])
}

func (tr *trigger) closeJob() error {
	open := slices.DeleteFunc(slices.Clone(practice.JobStages), practice.ClosedStage)
	j, before, err := tr.jobFor(open)
	if err != nil {
		return err
	}
	return tr.move(j, before, "completed")
}

func (tr *trigger) move(j practice.Job, before json.RawMessage, stage string) error {
	moveJob(&j, stage, tr.now)
	_, err := tr.put(practice.Jobs, before, j, tr.stageNote(stage))
	return err
}

// stageNote is what a member of staff would write when moving a job.
func (tr *trigger) stageNote(stage string) string {
	switch stage {
	case "ready_to_start":
		return "Engagement confirmed and records requested; ready to start."
	case "awaiting_client":
		return "Asked the client for bank statements and receipts."
	case "in_progress":
		return "Client information received; work started."
	case "in_review":
		return "Draft prepared and passed to the manager for review."
	case "awaiting_client_approval":
		return "Review points cleared; draft sent to the client for approval."
	case "filed":
		return "Client approved; filed with " + tr.g.st.authority + "."
	case "completed":
		return "Filing acknowledged by " + tr.g.st.authority + " and the client informed."
	}
	return ""
}

func (tr *trigger) fileDocument() error {
	c, _, err := tr.client()
	if err != nil {
		return err
	}
	_, err = tr.put(practice.Documents, nil, tr.g.document(&c, pickWeighted(tr.g.rng, documentKindWeights), "", tr.now), "")
	return err
}

// raiseInvoice issues an invoice with the next number.
func (tr *trigger) raiseInvoice() (practice.Invoice, error) {
	c, _, err := tr.client()
	if err != nil {
		return practice.Invoice{}, err
	}
	tr.lastInvoice = tr.ts.lastInvoice + 1
	inv := tr.g.invoice(&c, tr.lastInvoice, "issued", tr.now)
	_, err = tr.put(practice.Invoices, nil, inv, "")
	return inv, err
}

// payInvoice settles an issued invoice in full, raising one first if none
// is outstanding.
func (tr *trigger) payInvoice() error {
	var inv practice.Invoice
	before, found, err := tr.pick(practice.Invoices, func(e *entry) bool { return e.Status == "issued" }, &inv)
	switch {
	case err != nil:
		return err
	case !found:
		if inv, err = tr.raiseInvoice(); err != nil {
			return err
		}
		before = tr.pending[len(tr.pending)-1].entry.Raw
	}
	tr.g.pay(&inv, tr.now)
	_, err = tr.put(practice.Invoices, before, inv, "")
	return err
}
