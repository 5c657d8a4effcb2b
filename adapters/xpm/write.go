package xpm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// Writes go to XPM and come back as XPM then has the record: each ends
// with XPM's answer or a fresh read, translated and stamped as a read
// would be, so the answer is what the next GET shows. Each write's change
// record is published once, through the same Recorder as every other
// change of the firm's records.

// send makes a write. XPM's refusals (a 400, or an answer whose status is
// ERROR) become a parameter_invalid naming what was refused.
func (a *Adapter) send(ctx context.Context, method, path string, q url.Values, body any, out xpmAnswer, what string) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("xpm: encode %s: %w", what, err)
	}
	if out == nil {
		out = new(answer)
	}
	_, err = a.c.JSON(ctx, upstream.Request{Method: method, Path: path, Query: q, Body: b}, what, out)
	var s *practice.StatusError
	if errors.As(err, &s) && (s.Status == http.StatusBadRequest || s.Status == http.StatusUnprocessableEntity) {
		var e answer
		json.Unmarshal(s.Body, &e)
		if e.Status == "" {
			e.Status = "ERROR"
		}
		return a.refused(&e, what, true)
	}
	if err != nil {
		return fmt.Errorf("xpm: write %s: %w", what, err)
	}
	return a.refused(out.status(), what, true)
}

// paramOf names the /v1 parameter a refused write is about.
func paramOf(what string) string {
	switch what {
	case "job state":
		return "stage"
	case "job manager":
		return "owner"
	case "job", "job update":
		return "title"
	case "client", "client update", "client archive":
		return "name"
	case "contact":
		return "contacts"
	}
	return what
}

// recordWrite publishes the change a write made, when Deps.Changes is
// set. The write has happened, so a failure here is logged: the
// synchronizer's next poll reports the same change.
func (a *Adapter) recordWrite(ctx context.Context, k practice.Kind, id string, before, after json.RawMessage, note string) {
	if a.changes == nil || before != nil && bytes.Equal(before, after) && note == "" {
		return
	}
	o := changes.Observation{Tenant: a.tenant(), Kind: k, ResourceID: id, Before: before, After: after,
		Created: before == nil, Note: note}
	if _, err := a.rec.Observe(ctx, a.changes, o); err != nil {
		a.log.Warn("change of a write not recorded", zap.String("id", id), zap.Error(err))
	}
}

// staffUUID is the staff member an owner names.
func staffUUID(owner string) (string, error) {
	uuid, ok := parseID(practice.People, owner)
	if !ok {
		return "", practice.Invalid("owner", "The owner must be a person's id, such as usr_%s.", "4c624afa-b72e-4ad6-9c80-8a91537899fd")
	}
	return uuid, nil
}

func (a *Adapter) countryName(code string) string {
	if n, ok := countryNames[strings.ToUpper(code)]; ok {
		return n
	}
	return strings.ToUpper(code)
}

// CreateClient adds a client, with its contacts, in XPM.
func (a *Adapter) CreateClient(ctx context.Context, t practice.Tenant, in practice.ClientInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("xpm: no records for %s: %w", t, practice.ErrNotFound)
	}
	if err := a.checkClientInput(in, true); err != nil {
		return nil, err
	}
	body := map[string]any{"name": *in.Name}
	if err := a.clientFields(in, body); err != nil {
		return nil, err
	}
	if in.Contacts != nil {
		cs := []map[string]any{}
		for i, c := range *in.Contacts {
			cs = append(cs, contactBody(c, i == 0))
		}
		body["contacts"] = cs
	}
	var one clientOne
	if err := a.send(ctx, http.MethodPost, "/v3.1/client.api/add", nil, body, &one, "client"); err != nil {
		return nil, err
	}
	if one.Client == nil || !uuidRE.MatchString(one.Client.UUID) {
		return nil, upstream.Malformed(a.c.Label(), "added client", fmt.Errorf("no client uuid"))
	}
	c := one.Client
	if in.Status != nil && *in.Status == "archived" {
		if err := a.send(ctx, http.MethodPut, "/v3.1/client.api/archive", nil, map[string]any{"uuid": c.UUID}, nil, "client archive"); err != nil {
			return nil, err
		}
		var err error
		if c, err = a.readClient(ctx, c.UUID); err != nil {
			return nil, err
		}
	}
	rec, err := a.clientRecord(ctx, c)
	if err != nil {
		return nil, err
	}
	after, err := practice.Marshal(&rec)
	if err != nil {
		return nil, err
	}
	a.recordWrite(ctx, practice.Clients, rec.ID, nil, after, "")
	return after, nil
}

// UpdateClient changes a client's details, archives it when its status
// becomes archived, and makes its contacts the ones given: matched by
// name, updated, added or deleted.
func (a *Adapter) UpdateClient(ctx context.Context, t practice.Tenant, id string, in practice.ClientInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("xpm: no records for %s: %w", t, practice.ErrNotFound)
	}
	uuid, ok := parseID(practice.Clients, id)
	if !ok {
		return nil, notFound(practice.Clients, id)
	}
	if err := a.checkClientInput(in, false); err != nil {
		return nil, err
	}
	current, err := a.readClient(ctx, uuid)
	if err != nil {
		return nil, err
	}
	beforeRec, err := a.clientRecord(ctx, current)
	if err != nil {
		return nil, err
	}
	before, _ := practice.Marshal(&beforeRec)
	if in.Status != nil && beforeRec.Status == "archived" && *in.Status != "archived" {
		return nil, practice.Invalid("status", "Xero Practice Manager cannot restore an archived client through its API; restore it in XPM.")
	}
	body := map[string]any{}
	if err := a.clientFields(in, body); err != nil {
		return nil, err
	}
	if in.Name != nil || len(body) > 0 {
		body["uuid"] = uuid
		body["name"] = beforeRec.Name
		if in.Name != nil {
			body["name"] = *in.Name
		}
		if err := a.send(ctx, http.MethodPut, "/v3.1/client.api/update", nil, body, nil, "client update"); err != nil {
			return nil, err
		}
	}
	if in.Contacts != nil {
		if err := a.syncContacts(ctx, current, *in.Contacts); err != nil {
			return nil, err
		}
	}
	if in.Status != nil && *in.Status == "archived" && beforeRec.Status != "archived" {
		if err := a.send(ctx, http.MethodPut, "/v3.1/client.api/archive", nil, map[string]any{"uuid": uuid}, nil, "client archive"); err != nil {
			return nil, err
		}
	}
	c, err := a.readClient(ctx, uuid)
	if err != nil {
		return nil, err
	}
	rec, err := a.clientRecord(ctx, c)
	if err != nil {
		return nil, err
	}
	after, err := practice.Marshal(&rec)
	if err != nil {
		return nil, err
	}
	a.recordWrite(ctx, practice.Clients, id, before, after, "")
	return after, nil
}

func (a *Adapter) checkClientInput(in practice.ClientInput, create bool) error {
	if err := in.Validate(create); err != nil {
		return err
	}
	if in.Status != nil && *in.Status == "inactive" {
		return practice.Invalid("status", "Xero Practice Manager has no inactive clients; use archived.")
	}
	return nil
}

// clientFields puts the fields of in that XPM's add and update share in
// body.
func (a *Adapter) clientFields(in practice.ClientInput, body map[string]any) error {
	if in.Email != nil {
		body["email"] = *in.Email
	}
	if in.Phone != nil {
		body["phone"] = *in.Phone
	}
	if in.Country != nil {
		body["country"] = a.countryName(*in.Country)
	}
	if in.Type != nil {
		body["businessStructure"] = structureOf(*in.Type)
	}
	if in.Status != nil && *in.Status != "archived" {
		body["isProspect"] = flag(*in.Status == "prospect")
	}
	if in.Owner != nil {
		uuid, err := staffUUID(*in.Owner)
		if err != nil {
			return err
		}
		body["accountManagerUuid"] = uuid
	}
	return nil
}

func contactBody(c practice.Contact, primary bool) map[string]any {
	m := map[string]any{"name": c.Name, "position": c.Role, "isPrimary": flag(primary)}
	if c.Email != "" {
		m["email"] = c.Email
	}
	if c.Phone != "" {
		m["phone"] = c.Phone
	}
	return m
}

// syncContacts makes a client's contacts those given, matching by name.
func (a *Adapter) syncContacts(ctx context.Context, c *client, want []practice.Contact) error {
	have := map[string]contact{}
	for _, ct := range c.Contacts {
		if !yes(ct.IsDeleted) && uuidRE.MatchString(ct.UUID) {
			have[norm(ct.Name)] = ct
		}
	}
	q := url.Values{"clientUuid": {c.UUID}}
	for i, w := range want {
		body := contactBody(w, i == 0)
		if old, ok := have[norm(w.Name)]; ok {
			delete(have, norm(w.Name))
			if old.Position == w.Role && old.Email == w.Email && (w.Phone == "" || old.Phone == w.Phone) && yes(old.IsPrimary) == (i == 0) {
				continue
			}
			if err := a.send(ctx, http.MethodPut, "/v3.1/client.api/contact/"+url.PathEscape(old.UUID), q, body, nil, "contact"); err != nil {
				return err
			}
			continue
		}
		body["client"] = map[string]any{"uuid": c.UUID}
		if err := a.send(ctx, http.MethodPost, "/v3.1/client.api/contact", nil, body, nil, "contact"); err != nil {
			return err
		}
	}
	for _, old := range have {
		if err := a.send(ctx, http.MethodDelete, "/v3.1/client.api/contact/"+url.PathEscape(old.UUID), q, nil, nil, "contact"); err != nil {
			return err
		}
	}
	return nil
}

// CreateJob adds a job starting today; XPM needs a due date, which is
// the deadline, or today.
func (a *Adapter) CreateJob(ctx context.Context, t practice.Tenant, in practice.JobInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("xpm: no records for %s: %w", t, practice.ErrNotFound)
	}
	if err := checkJobInput(in, true); err != nil {
		return nil, err
	}
	clientUUID, ok := parseID(practice.Clients, *in.Client)
	if !ok {
		return nil, practice.Invalid("client", "There is no client %s in this firm's Xero Practice Manager.", *in.Client)
	}
	today := a.clock.Now().In(a.loc).Format("20060102")
	body := map[string]any{"name": *in.Title, "clientUuid": clientUUID, "startDate": today, "dueDate": today}
	if in.Deadline != nil {
		body["dueDate"] = xpmDay(*in.Deadline)
	}
	if in.Type != nil {
		uuid, err := a.categoryUUID(ctx, *in.Type)
		if err != nil {
			return nil, err
		}
		body["categoryUuid"] = uuid
	}
	var one jobOne
	if err := a.send(ctx, http.MethodPost, "/v3.1/job.api/add", nil, body, &one, "job"); err != nil {
		return nil, err
	}
	if one.Job == nil || !numberRE.MatchString(one.Job.ID) {
		return nil, upstream.Malformed(a.c.Label(), "added job", fmt.Errorf("no job number"))
	}
	j := one.Job
	if in.Owner != nil {
		if err := a.assignManager(ctx, j.ID, *in.Owner); err != nil {
			return nil, err
		}
		var err error
		if j, err = a.readJob(ctx, j.ID); err != nil {
			return nil, err
		}
	}
	rec, err := a.jobRecord(ctx, j)
	if err != nil {
		return nil, err
	}
	after, err := practice.Marshal(&rec)
	if err != nil {
		return nil, err
	}
	a.recordWrite(ctx, practice.Jobs, rec.ID, nil, after, "")
	return after, nil
}

// UpdateJob changes a job's name, category or due date with XPM's update,
// and its manager with an assignment. XPM cannot move a job to another
// client.
func (a *Adapter) UpdateJob(ctx context.Context, t practice.Tenant, id string, in practice.JobInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("xpm: no records for %s: %w", t, practice.ErrNotFound)
	}
	number, ok := parseID(practice.Jobs, id)
	if !ok {
		return nil, notFound(practice.Jobs, id)
	}
	if err := checkJobInput(in, false); err != nil {
		return nil, err
	}
	current, err := a.readJob(ctx, number)
	if err != nil {
		return nil, err
	}
	beforeRec, err := a.jobRecord(ctx, current)
	if err != nil {
		return nil, err
	}
	before, _ := practice.Marshal(&beforeRec)
	if in.Client != nil && *in.Client != practice.ValueOf(beforeRec.Client) {
		return nil, practice.Invalid("client", "Xero Practice Manager cannot move a job to another client.")
	}
	if in.Title != nil || in.Deadline != nil || in.Type != nil {
		body := map[string]any{"id": number, "name": current.Name}
		if d, _ := xpmDate(current.StartDate); d != "" {
			body["startDate"] = xpmDay(d)
		}
		if d, _ := xpmDate(current.DueDate); d != "" {
			body["dueDate"] = xpmDay(d)
		}
		if in.Title != nil {
			body["name"] = *in.Title
		}
		if in.Deadline != nil {
			body["dueDate"] = xpmDay(*in.Deadline)
		}
		if in.Type != nil {
			uuid, err := a.categoryUUID(ctx, *in.Type)
			if err != nil {
				return nil, err
			}
			body["categoryUuid"] = uuid
		}
		if err := a.send(ctx, http.MethodPut, "/v3.1/job.api/update", nil, body, nil, "job update"); err != nil {
			return nil, err
		}
	}
	if in.Owner != nil && *in.Owner != practice.ValueOf(beforeRec.Owner) {
		if err := a.assignManager(ctx, number, *in.Owner); err != nil {
			return nil, err
		}
	}
	return a.afterJobWrite(ctx, number, before, "")
}

// MoveJob writes the XPM state that stands for the stage (Config.StageMap)
// and the note as a job note.
func (a *Adapter) MoveJob(ctx context.Context, t practice.Tenant, id string, move practice.StageMove) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("xpm: no records for %s: %w", t, practice.ErrNotFound)
	}
	number, ok := parseID(practice.Jobs, id)
	if !ok {
		return nil, notFound(practice.Jobs, id)
	}
	if err := move.Validate(); err != nil {
		return nil, err
	}
	states, err := a.jobStates(ctx)
	if err != nil {
		return nil, err
	}
	stages := a.stages.Load()
	state, ok := stages.target(states, move.Stage)
	if !ok {
		return nil, practice.UnmappedStage("Xero Practice Manager", "job state", move.Stage, practice.MappedStages(stages.states(states)))
	}
	current, err := a.readJob(ctx, number)
	if err != nil {
		return nil, err
	}
	beforeRec, err := a.jobRecord(ctx, current)
	if err != nil {
		return nil, err
	}
	before, _ := practice.Marshal(&beforeRec)
	if err := a.send(ctx, http.MethodPut, "/v3.1/job.api/state", nil, map[string]any{"id": number, "state": state}, nil, "job state"); err != nil {
		return nil, err
	}
	if move.Note != "" {
		note := map[string]any{"job": number, "title": "Moved to " + strings.ReplaceAll(move.Stage, "_", " "),
			"text": move.Note, "public": false}
		if a.cfg.NoteFolder != "" {
			note["folder"] = a.cfg.NoteFolder
		}
		// The move is done; a note that fails is worth a warning, not an
		// error that would make the caller move the job again.
		if err := a.send(ctx, http.MethodPost, "/v3.1/job.api/note", nil, note, nil, "job note"); err != nil {
			a.log.Warn("stage move note not written", zap.String("job", id), zap.Error(err))
		}
	}
	return a.afterJobWrite(ctx, number, before, move.Note)
}

// afterJobWrite reads the job back, records the change and answers it.
func (a *Adapter) afterJobWrite(ctx context.Context, number string, before json.RawMessage, note string) (json.RawMessage, error) {
	j, err := a.readJob(ctx, number)
	if err != nil {
		return nil, err
	}
	rec, err := a.jobRecord(ctx, j)
	if err != nil {
		return nil, err
	}
	after, err := practice.Marshal(&rec)
	if err != nil {
		return nil, err
	}
	a.recordWrite(ctx, practice.Jobs, rec.ID, before, after, note)
	return after, nil
}

func (a *Adapter) assignManager(ctx context.Context, number, owner string) error {
	uuid, err := staffUUID(owner)
	if err != nil {
		return err
	}
	body := map[string]any{"id": number, "add-manager": map[string]any{"uuid": uuid}}
	return a.send(ctx, http.MethodPut, "/v3.1/job.api/assign", nil, body, nil, "job manager")
}

// categoryUUID is the job category a job type names.
func (a *Adapter) categoryUUID(ctx context.Context, typ string) (string, error) {
	cats, err := a.categories(ctx)
	if err != nil {
		return "", err
	}
	for _, c := range cats {
		if norm(c.Name) == norm(typ) && c.UUID != "" {
			return c.UUID, nil
		}
	}
	return "", practice.Invalid("type", "There is no job category %q in this firm's Xero Practice Manager.", typ)
}

func checkJobInput(in practice.JobInput, create bool) error {
	if err := in.Validate(create); err != nil {
		return err
	}
	if in.Engagement != nil && *in.Engagement != "" {
		return practice.Invalid("engagement", "Xero Practice Manager links no job to a quote through its API; leave engagement out for this firm's jobs.")
	}
	return nil
}
