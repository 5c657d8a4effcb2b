package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// endpointRow is one endpoint with its health over the last 24 hours.
type endpointRow struct {
	Endpoint dispatcher.Endpoint
	Stats    endpointStats
	Health   health
}

// loadEndpoints returns the firm's live and sandbox endpoints, worst
// first.
func (h *Handler) loadEndpoints(ctx context.Context, v *visit) ([]endpointRow, error) {
	now := h.now()
	var rows []endpointRow
	for _, t := range v.tenants() {
		eps, err := h.endpoints.ListEndpoints(ctx, t)
		if err != nil {
			return nil, err
		}
		for _, ep := range eps {
			s, err := endpointStatsOf(ctx, h.deliveries, t, ep.ID, now)
			if err != nil {
				return nil, err
			}
			rows = append(rows, endpointRow{Endpoint: ep, Stats: s, Health: s.health(ep)})
		}
	}
	sort.SliceStable(rows, func(i, j int) bool {
		if rows[i].Health.Rank != rows[j].Health.Rank {
			return rows[i].Health.Rank < rows[j].Health.Rank
		}
		return !rows[i].Endpoint.Sandbox && rows[j].Endpoint.Sandbox
	})
	return rows, nil
}

type webhooksView struct {
	Endpoints []endpointRow
	Live      int
	Sandbox   int
}

func (h *Handler) webhooks(w http.ResponseWriter, r *http.Request, v *visit) error {
	rows, err := h.loadEndpoints(r.Context(), v)
	if err != nil {
		return err
	}
	view := webhooksView{Endpoints: rows}
	for _, row := range rows {
		if row.Endpoint.Sandbox {
			view.Sandbox++
		} else {
			view.Live++
		}
	}
	h.render(w, r, v, http.StatusOK, "webhooks", "Webhooks", view)
	return nil
}

// findEndpoint finds one of the firm's endpoints, live or sandbox.
func (h *Handler) findEndpoint(ctx context.Context, v *visit, id string) (dispatcher.Endpoint, practice.Tenant, error) {
	for _, t := range v.tenants() {
		ep, err := h.endpoints.GetEndpoint(ctx, t, id)
		if err == nil {
			return ep, t, nil
		}
		if !errors.Is(err, dispatcher.ErrNotFound) {
			return dispatcher.Endpoint{}, t, err
		}
	}
	return dispatcher.Endpoint{}, practice.Tenant{}, notFound("webhook endpoint " + id)
}

// findDelivery finds one of the firm's deliveries, live or sandbox.
func (h *Handler) findDelivery(ctx context.Context, v *visit, id string) (dispatcher.Delivery, practice.Tenant, error) {
	for _, t := range v.tenants() {
		d, err := h.deliveries.GetDelivery(ctx, t, id)
		if err == nil {
			return d, t, nil
		}
		if !errors.Is(err, dispatcher.ErrNotFound) {
			return dispatcher.Delivery{}, t, err
		}
	}
	return dispatcher.Delivery{}, practice.Tenant{}, notFound("delivery " + id)
}

// deliveryFilter is the endpoint page's filter, as typed and as parsed.
type deliveryFilter struct {
	State, Event, From, To string
	Page                   int
	from, to               time.Time
}

// defaultListWindow bounds the endpoint page when no From is given, so
// the newest deliveries are always among those read.
const defaultListWindow = 7 * 24 * time.Hour

// maxListScan caps the deliveries read for one endpoint page.
const maxListScan = 5000

const perPage = 25

// formTime is how datetime-local inputs send a time; the console reads
// them as UTC and says so.
const formTime = "2006-01-02T15:04"

func parseFormTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{formTime, "2006-01-02T15:04:05", time.RFC3339, "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.UTC); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not a time: use YYYY-MM-DDTHH:MM (UTC)", s)
}

func parseFilter(q url.Values, now time.Time) (deliveryFilter, []string) {
	f := deliveryFilter{State: q.Get("state"), Event: q.Get("event"), From: q.Get("from"), To: q.Get("to")}
	var problems []string
	if f.State != "" && !dispatcher.State(f.State).Valid() {
		problems = append(problems, fmt.Sprintf("%q is not a delivery state.", f.State))
		f.State = ""
	}
	if f.Event != "" && !slices.Contains(subscribableKinds(), f.Event) {
		problems = append(problems, fmt.Sprintf("%q is not an event kind.", f.Event))
		f.Event = ""
	}
	if f.From == "" {
		f.From = now.Add(-defaultListWindow).UTC().Format(formTime)
	}
	var err error
	if f.from, err = parseFormTime(f.From); err != nil {
		problems = append(problems, "From: "+err.Error())
	}
	if f.To != "" {
		if f.to, err = parseFormTime(f.To); err != nil {
			problems = append(problems, "To: "+err.Error())
		}
	}
	f.Page, _ = strconv.Atoi(q.Get("page"))
	f.Page = max(f.Page, 1)
	return f, problems
}

// query renders the filter back as a query string, on another page.
func (f deliveryFilter) query(page int) string {
	q := url.Values{}
	for k, v := range map[string]string{"state": f.State, "event": f.Event, "from": f.From, "to": f.To} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if page > 1 {
		q.Set("page", strconv.Itoa(page))
	}
	return q.Encode()
}

func (f deliveryFilter) states() []dispatcher.State {
	if f.State == "" {
		return nil
	}
	return []dispatcher.State{dispatcher.State(f.State)}
}

// subscribableKinds are the event kinds and the alias a delivery may
// carry.
func subscribableKinds() []string {
	return append(dispatcher.Kinds(), dispatcher.EngagementLetterSign)
}

type endpointView struct {
	Row        endpointRow
	Filter     deliveryFilter
	Problems   []string
	Deliveries []deliveryItem
	Matching   int
	Capped     bool
	Page       int
	Pages      int
	PrevURL    string
	NextURL    string
	ExportCSV  string
	ExportJSON string
	States     []string
	Kinds      []string
	Since      string
}

// deliveryItem is a delivery as the expandable list shows it.
type deliveryItem struct {
	D    dispatcher.Delivery
	Open bool
	CSRF string
}

func (h *Handler) endpointPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	ep, t, err := h.findEndpoint(ctx, v, r.PathValue("id"))
	if err != nil {
		return err
	}
	now := h.now()
	stats, err := endpointStatsOf(ctx, h.deliveries, t, ep.ID, now)
	if err != nil {
		return err
	}
	f, problems := parseFilter(r.URL.Query(), now)
	view := endpointView{Row: endpointRow{Endpoint: ep, Stats: stats, Health: stats.health(ep)}, Filter: f, Problems: problems,
		States: []string{"pending", "retrying", "delivered", "failed"}, Kinds: subscribableKinds(),
		Since: now.Add(-statsWindow).UTC().Format(formTime)}
	if len(problems) == 0 {
		var matching []dispatcher.Delivery
		q := dispatcher.DeliveryQuery{EndpointID: ep.ID, States: f.states(), From: f.from, To: f.to, Limit: dispatcher.MaxLimit}
		scanned := 0
		for {
			page, err := h.deliveries.ListDeliveries(ctx, t, q)
			if err != nil {
				return err
			}
			for _, d := range page.Deliveries {
				if f.Event == "" || d.Event == f.Event {
					matching = append(matching, d)
				}
			}
			scanned += len(page.Deliveries)
			if !page.HasMore {
				break
			}
			if scanned >= maxListScan {
				view.Capped = true
				break
			}
			q.Cursor = page.Next
		}
		// The store lists oldest first; people look for the latest.
		slices.Reverse(matching)
		view.Matching = len(matching)
		view.Pages = max(1, (len(matching)+perPage-1)/perPage)
		view.Page = min(f.Page, view.Pages)
		start := (view.Page - 1) * perPage
		for i, d := range matching[start:min(start+perPage, len(matching))] {
			// The first failed delivery on the page opens, to show why.
			view.Deliveries = append(view.Deliveries, deliveryItem{D: d, CSRF: v.csrf,
				Open: i == 0 && d.State == dispatcher.StateFailed})
		}
		base := "/console/webhooks/" + ep.ID + "?"
		if view.Page > 1 {
			view.PrevURL = base + f.query(view.Page-1)
		}
		if view.Page < view.Pages {
			view.NextURL = base + f.query(view.Page+1)
		}
	}
	exportQ := deliveryFilter{State: f.State, From: f.From, To: f.To}.query(1)
	view.ExportCSV = "/console/webhooks/" + ep.ID + "/export.csv?" + exportQ
	view.ExportJSON = "/console/webhooks/" + ep.ID + "/export.ndjson?" + exportQ
	h.render(w, r, v, http.StatusOK, "endpoint", endpointTitle(ep), view)
	return nil
}

func endpointTitle(ep dispatcher.Endpoint) string {
	if ep.Description != "" {
		return ep.Description
	}
	return ep.URL
}

func (h *Handler) setStatus(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	ep, t, err := h.findEndpoint(ctx, v, r.PathValue("id"))
	if err != nil {
		return err
	}
	status := r.PostForm.Get("status")
	if status != dispatcher.EndpointEnabled && status != dispatcher.EndpointDisabled {
		return pageErr(http.StatusBadRequest, "Unknown status", "An endpoint is either enabled or disabled.")
	}
	if _, err := h.endpoints.UpdateEndpoint(ctx, t, ep.ID, dispatcher.EndpointUpdate{Status: &status}); err != nil {
		return err
	}
	h.logger.Info("console changed a webhook endpoint's status", zap.String("endpoint_id", ep.ID),
		zap.String("status", status), zap.String("by", v.cred.ID))
	msg := flash{Kind: "ok", Text: "Endpoint enabled. Deliveries that failed while it was off stay failed: replay them below."}
	if status == dispatcher.EndpointDisabled {
		msg = flash{Kind: "warn", Text: "Endpoint disabled. New events are not sent to it; its deliveries fail until you enable it."}
	}
	h.sessions.addFlash(v.sess.ID, msg)
	return redirect(w, r, "/console/webhooks/"+ep.ID)
}

func (h *Handler) replayFailed(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	ep, t, err := h.findEndpoint(ctx, v, r.PathValue("id"))
	if err != nil {
		return err
	}
	since, err := parseFormTime(r.PostForm.Get("since"))
	if err != nil {
		h.sessions.addFlash(v.sess.ID, flash{Kind: "bad", Text: "Replay failures since: " + err.Error()})
		return redirect(w, r, "/console/webhooks/"+ep.ID)
	}
	n, err := h.replays.ReplayFailed(ctx, t, ep.ID, since)
	when := since.UTC().Format("2 Jan 15:04 UTC")
	switch {
	case errors.Is(err, practice.ErrEndpointDisabled):
		h.sessions.addFlash(v.sess.ID, flash{Kind: "bad", Text: "The endpoint is disabled: enable it, then replay its failures."})
	case err != nil:
		return err
	case n == 0:
		h.sessions.addFlash(v.sess.ID, flash{Kind: "ok", Text: "No failed deliveries since " + when + ": nothing to replay."})
	default:
		h.logger.Info("console replayed failed deliveries", zap.String("endpoint_id", ep.ID), zap.Int("count", n),
			zap.String("by", v.cred.ID))
		h.sessions.addFlash(v.sess.ID, flash{Kind: "ok", Text: fmt.Sprintf(
			"Queued %s since %s for replay. They go out one attempt each, behind the endpoint's circuit breaker; refresh to watch them land.",
			plural(int64(n), "failed delivery", "failed deliveries"), when)})
	}
	return redirect(w, r, "/console/webhooks/"+ep.ID+"?from="+url.QueryEscape(since.UTC().Format(formTime)))
}

func (h *Handler) export(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	ep, t, err := h.findEndpoint(ctx, v, r.PathValue("id"))
	if err != nil {
		return err
	}
	f, problems := parseFilter(r.URL.Query(), h.now())
	if len(problems) > 0 {
		return pageErr(http.StatusBadRequest, "That export cannot be made", strings.Join(problems, " "))
	}
	q := dispatcher.ExportQuery{EndpointID: ep.ID, States: f.states(), From: f.from, To: f.to}
	ext := path.Ext(r.URL.Path)
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s-deliveries%s"`, ep.ID, ext))
	if ext == ".csv" {
		w.Header().Set("Content-Type", "text/csv; charset=utf-8")
		err = h.exports.ExportCSV(ctx, t, q, w)
	} else {
		w.Header().Set("Content-Type", "application/x-ndjson")
		err = h.exports.ExportNDJSON(ctx, t, q, w)
	}
	if err != nil {
		// The download has begun; all that can be done is to note it.
		h.logger.Warn("console export cut short", zap.String("endpoint_id", ep.ID), zap.Error(err))
	}
	return nil
}

type deliveryView struct {
	Item     deliveryItem
	Endpoint dispatcher.Endpoint
}

func (h *Handler) deliveryPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	d, t, err := h.findDelivery(ctx, v, r.PathValue("id"))
	if err != nil {
		return err
	}
	ep, err := h.endpoints.GetEndpoint(ctx, t, d.EndpointID)
	if err != nil {
		return err
	}
	h.render(w, r, v, http.StatusOK, "delivery", "Delivery "+d.ID,
		deliveryView{Item: deliveryItem{D: d, Open: true, CSRF: v.csrf}, Endpoint: ep})
	return nil
}

func (h *Handler) replay(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	d, t, err := h.findDelivery(ctx, v, r.PathValue("id"))
	if err != nil {
		return err
	}
	saved, err := h.replays.Replay(ctx, t, d.ID)
	switch {
	case errors.Is(err, practice.ErrEndpointDisabled):
		h.sessions.addFlash(v.sess.ID, flash{Kind: "bad", Text: "The endpoint is disabled: enable it before replaying.",
			Link: "/console/webhooks/" + d.EndpointID, LinkText: "Open the endpoint"})
	case errors.Is(err, practice.ErrBusy):
		h.sessions.addFlash(v.sess.ID, flash{Kind: "warn", Text: "An attempt on this delivery is in flight right now. Try again in a moment."})
	case err != nil:
		return err
	default:
		h.logger.Info("console replayed a delivery", zap.String("delivery_id", d.ID), zap.String("state", string(saved.State)),
			zap.String("by", v.cred.ID))
		h.sessions.addFlash(v.sess.ID, replayFlash(saved))
	}
	return redirect(w, r, "/console/deliveries/"+d.ID)
}

// replayFlash says how a replay went.
func replayFlash(d dispatcher.Delivery) flash {
	if len(d.Attempts) == 0 {
		return flash{Kind: "warn", Text: "The replay made no attempt."}
	}
	a := d.Attempts[len(d.Attempts)-1]
	if d.State == dispatcher.StateDelivered {
		return flash{Kind: "ok", Text: fmt.Sprintf("Replay delivered: %s in %s.", codeText(a.ResponseCode), millis(a.DurationMS))}
	}
	why := codeText(a.ResponseCode)
	if a.Error != "" {
		why = a.Error
	}
	return flash{Kind: "bad", Text: fmt.Sprintf("Replay failed: %s after %s. The delivery stays failed.", why, millis(a.DurationMS))}
}

// eventView is an event and the deliveries it made.
type eventView struct {
	Event      dispatcher.Event
	Envelope   []byte
	Deliveries []eventDelivery
	Waiting    bool
}

type eventDelivery struct {
	D        dispatcher.Delivery
	Endpoint dispatcher.Endpoint
}

// maxEventScan caps the deliveries read per endpoint to find an event's.
const maxEventScan = 1000

func (h *Handler) eventPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	id := r.PathValue("id")
	var (
		ev  dispatcher.Event
		t   practice.Tenant
		err error
	)
	for _, t = range v.tenants() {
		if ev, err = h.deliveries.GetEvent(ctx, t, id); !errors.Is(err, dispatcher.ErrNotFound) {
			break
		}
	}
	if errors.Is(err, dispatcher.ErrNotFound) {
		return notFound("event " + id)
	}
	if err != nil {
		return err
	}
	view := eventView{Event: ev}
	if view.Envelope, err = ev.MarshalJSON(); err != nil {
		return err
	}
	eps, err := h.endpoints.ListEndpoints(ctx, t)
	if err != nil {
		return err
	}
	// Deliveries are made after the event is recorded; a minute's slack
	// covers clocks.
	for _, ep := range eps {
		q := dispatcher.DeliveryQuery{EndpointID: ep.ID, From: ev.OccurredAt.Add(-time.Minute), Limit: dispatcher.MaxLimit}
		for scanned := 0; scanned < maxEventScan; {
			page, err := h.deliveries.ListDeliveries(ctx, t, q)
			if err != nil {
				return err
			}
			for _, d := range page.Deliveries {
				if d.EventID == ev.ID {
					view.Deliveries = append(view.Deliveries, eventDelivery{D: d, Endpoint: ep})
					view.Waiting = view.Waiting || d.State.Active()
				}
			}
			scanned += len(page.Deliveries)
			if !page.HasMore {
				break
			}
			q.Cursor = page.Next
		}
	}
	// A fresh event's deliveries may not be made yet: the page refreshes
	// itself for a while.
	view.Waiting = view.Waiting || (len(view.Deliveries) == 0 && h.now().Sub(ev.OccurredAt) < 30*time.Second)
	h.render(w, r, v, http.StatusOK, "event", ev.Event+" "+ev.ID, view)
	return nil
}
