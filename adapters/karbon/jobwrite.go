package karbon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
)

// workPutFields are RequestCreateWorkItem's fields, less WorkStatus: when
// it and PrimaryStatus disagree Karbon goes by PrimaryStatus, so a move
// sends the primary and secondary status only.
var workPutFields = []string{"AssigneeEmailAddress", "Title", "ClientKey", "ClientType", "RelatedClientGroupKey",
	"StartDate", "DueDate", "DeadlineDate", "WorkType", "PrimaryStatus", "SecondaryStatus", "WorkTemplateKey",
	"WorkScheduleKey", "EstimatedBudget", "Description", "ClientTaskRecipient", "FeeSettings", "UserRoleAssignments"}

// CreateJob creates a Karbon work item starting today, in Karbon's
// initial status.
func (a *Adapter) CreateJob(ctx context.Context, t practice.Tenant, in practice.JobInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, practice.ErrNotFound)
	}
	if err := a.checkJobInput(in, true); err != nil {
		return nil, err
	}
	ref, ok := parseClientID(*in.Client)
	if !ok {
		return nil, practice.Invalid("client", "There is no client %s in this firm's Karbon.", *in.Client)
	}
	owner := a.cfg.DefaultAssignee
	set(&owner, in.Owner)
	if owner == "" {
		return nil, practice.Missing("owner")
	}
	email, err := a.assigneeEmail(ctx, owner)
	if err != nil {
		return nil, err
	}
	today := a.clock.Now().UTC().Truncate(24 * time.Hour).Format(time.RFC3339)
	body := map[string]any{"Title": *in.Title, "ClientKey": ref.key, "ClientType": ref.clientType(),
		"AssigneeEmailAddress": email, "StartDate": today}
	if in.Type != nil {
		body["WorkType"] = *in.Type
	}
	if in.Deadline != nil {
		body["DeadlineDate"] = *in.Deadline + "T00:00:00Z"
	}
	var created workItem
	if err := a.send(ctx, http.MethodPost, "/v3/WorkItems", body, &created, "job"); err != nil {
		return nil, err
	}
	if !validKey(created.WorkItemKey) {
		return nil, upstream.Malformed(a.c.Label(), "created work item", fmt.Errorf("key %q", created.WorkItemKey))
	}
	after, err := a.getJob(ctx, created.WorkItemKey)
	if err != nil {
		return nil, err
	}
	a.recordWrite(ctx, practice.Jobs, "job_"+created.WorkItemKey, nil, after, "")
	return after, nil
}

// UpdateJob changes a work item's title, type, deadline or assignee with
// Karbon's PATCH, and its client with a PUT (PATCH cannot).
func (a *Adapter) UpdateJob(ctx context.Context, t practice.Tenant, id string, in practice.JobInput) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, practice.ErrNotFound)
	}
	key, ok := parseKey(id, "job_")
	if !ok {
		return nil, notFound(practice.Jobs, id)
	}
	if err := a.checkJobInput(in, false); err != nil {
		return nil, err
	}
	before, err := a.getJob(ctx, key)
	if err != nil {
		return nil, err
	}
	patch := map[string]any{}
	if in.Title != nil {
		patch["Title"] = *in.Title
	}
	if in.Type != nil {
		patch["WorkType"] = *in.Type
	}
	if in.Deadline != nil {
		patch["DeadlineDate"] = *in.Deadline + "T00:00:00Z"
	}
	if in.Owner != nil {
		email, err := a.assigneeEmail(ctx, *in.Owner)
		if err != nil {
			return nil, err
		}
		patch["AssigneeEmailAddress"] = email
	}
	path := "/v3/WorkItems/" + url.PathEscape(key)
	if in.Client != nil {
		ref, ok := parseClientID(*in.Client)
		if !ok {
			return nil, practice.Invalid("client", "There is no client %s in this firm's Karbon.", *in.Client)
		}
		err := a.putWork(ctx, key, func(_ workItem, body map[string]any) error {
			for k, v := range patch {
				body[k] = v
			}
			body["ClientKey"], body["ClientType"] = ref.key, ref.clientType()
			delete(body, "RelatedClientGroupKey")
			return nil
		})
		if err != nil {
			return nil, err
		}
	} else if len(patch) > 0 {
		if err := a.send(ctx, http.MethodPatch, path, patch, nil, "job"); err != nil {
			return nil, err
		}
	}
	after, err := a.getJob(ctx, key)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(before, after) {
		a.recordWrite(ctx, practice.Jobs, id, before, after, "")
	}
	return after, nil
}

// MoveJob writes the Karbon status that stands for the stage (see
// Config.StageMap) and puts the note on the work item's timeline when
// Config.NoteAuthor is set. The job comes back as Karbon now has it.
func (a *Adapter) MoveJob(ctx context.Context, t practice.Tenant, id string, move practice.StageMove) (json.RawMessage, error) {
	if !a.serves(t) {
		return nil, fmt.Errorf("karbon: no records for %s: %w", t, practice.ErrNotFound)
	}
	key, ok := parseKey(id, "job_")
	if !ok {
		return nil, notFound(practice.Jobs, id)
	}
	if err := move.Validate(); err != nil {
		return nil, err
	}
	statuses, err := a.workStatuses(ctx)
	if err != nil {
		return nil, err
	}
	stages := a.stages.Load()
	primary, secondary, ok := stages.target(statuses, move.Stage)
	if !ok {
		return nil, practice.UnmappedStage("Karbon", "work status", move.Stage, practice.MappedStages(stages.states(statuses)))
	}
	var before json.RawMessage
	err = a.putWork(ctx, key, func(current workItem, body map[string]any) error {
		var err error
		if before, err = a.jobJSON(ctx, current); err != nil {
			return err
		}
		body["PrimaryStatus"] = primary
		body["SecondaryStatus"] = secondary
		if secondary == "" {
			delete(body, "SecondaryStatus")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if move.Note != "" && a.cfg.NoteAuthor != "" {
		note := map[string]any{
			"Subject": "Moved to " + strings.ReplaceAll(move.Stage, "_", " "), "Body": move.Note,
			"AuthorEmailAddress": a.cfg.NoteAuthor,
			"Timelines":          []any{map[string]string{"EntityType": "WorkItem", "EntityKey": key}},
		}
		// The move is done; a note that fails is worth a warning, not
		// an error that would make the caller move the job again.
		if err := a.send(ctx, http.MethodPost, "/v3/Notes", note, nil, "note"); err != nil {
			a.log.Warn("stage move note not written", zap.String("job", id), zap.Error(err))
		}
	}
	after, err := a.getJob(ctx, key)
	if err != nil {
		return nil, err
	}
	a.recordWrite(ctx, practice.Jobs, id, before, after, move.Note)
	return after, nil
}

// putWork reads a work item, lets edit change it and puts it back whole.
func (a *Adapter) putWork(ctx context.Context, key string, edit func(current workItem, body map[string]any) error) error {
	path := "/v3/WorkItems/" + url.PathEscape(key)
	began := a.clock.Now()
	resp, err := a.c.JSON(ctx, upstream.Request{Path: path}, "work item", nil)
	if err != nil {
		return fmt.Errorf("karbon: read work item %s: %w", key, err)
	}
	var current map[string]any
	w := workItem{read: began}
	if err := json.Unmarshal(resp.Body, &current); err != nil {
		return upstream.Malformed(a.c.Label(), "work item", err)
	}
	if err := json.Unmarshal(resp.Body, &w); err != nil {
		return upstream.Malformed(a.c.Label(), "work item", err)
	}
	if w.WorkItemKey == "" {
		w.WorkItemKey = key
	}
	body := pick(current, workPutFields)
	if err := edit(w, body); err != nil {
		return err
	}
	return a.send(ctx, http.MethodPut, path, body, nil, "job")
}

func (a *Adapter) checkJobInput(in practice.JobInput, create bool) error {
	if err := in.Validate(create); err != nil {
		return err
	}
	if in.Engagement != nil && *in.Engagement != "" {
		return practice.Invalid("engagement", "Karbon has no engagements; leave engagement out for this firm's jobs.")
	}
	return nil
}

// assigneeEmail is the email Karbon's work items name an assignee by, for
// a usr_ id or an email.
func (a *Adapter) assigneeEmail(ctx context.Context, owner string) (string, error) {
	dir, err := a.directory(ctx)
	if err != nil {
		return "", err
	}
	if key, ok := parseKey(owner, "usr_"); ok {
		if e := dir.email(key); e != "" {
			return e, nil
		}
	} else if key := dir.key(owner); key != "" {
		return dir.email(key), nil
	}
	return "", practice.Invalid("owner", "There is no person %s in this firm's Karbon.", owner)
}
