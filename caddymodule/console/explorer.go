package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice"
)

// explorerName names the sandbox credentials the explorer issues.
const explorerName = "Console explorer"

// explorerScopes are every scope but admin: the explorer can try any
// route, and only ever against the sandbox.
func explorerScopes() []string {
	return slices.DeleteFunc(slices.Clone(auth.Scopes), func(s string) bool { return s == "admin" })
}

type explorerView struct {
	Groups []opGroup
	// Unsent are the API's operations the explorer cannot send, by why.
	Unsent    []unsentGroup
	Op        *operation
	Values    map[string]string
	Body      string
	Result    *relayResult
	Kinds     []string
	Explorer  string // the session's sandbox credential id, once issued
	Sandboxed bool
}

// unsentGroup are operations the explorer cannot send for one reason.
type unsentGroup struct {
	Why string
	Ops []*operation
}

// relayResult is what the sandbox answered, for the page or for the
// explorer's script.
type relayResult struct {
	Method     string      `json:"method"`
	URL        string      `json:"url"`
	Status     int         `json:"status"`
	StatusText string      `json:"status_text"`
	Class      string      `json:"class"`
	Headers    [][2]string `json:"headers"`
	Body       string      `json:"body"`
	Truncated  bool        `json:"truncated"`
	DurationMS int64       `json:"duration_ms"`
	Problem    string      `json:"problem,omitempty"`
	Credential string      `json:"credential,omitempty"`
}

func (h *Handler) operation(id string) *operation {
	for i := range h.ops {
		if h.ops[i].ID == id {
			return &h.ops[i]
		}
	}
	return nil
}

func (h *Handler) explorerView(v *visit, opID string) explorerView {
	view := explorerView{Values: map[string]string{}, Kinds: sandboxKinds()}
	var tags []string
	byTag := map[string][]*operation{}
	for i := range h.ops {
		op := &h.ops[i]
		if op.Unsent != "" {
			i := slices.IndexFunc(view.Unsent, func(g unsentGroup) bool { return g.Why == op.Unsent })
			if i < 0 {
				i, view.Unsent = len(view.Unsent), append(view.Unsent, unsentGroup{Why: op.Unsent})
			}
			view.Unsent[i].Ops = append(view.Unsent[i].Ops, op)
			continue
		}
		if _, ok := byTag[op.Tag]; !ok {
			tags = append(tags, op.Tag)
		}
		byTag[op.Tag] = append(byTag[op.Tag], op)
	}
	for _, t := range tags {
		view.Groups = append(view.Groups, opGroup{Tag: t, Ops: byTag[t]})
	}
	view.Op = h.operation(opID)
	if view.Op == nil || view.Op.Unsent != "" {
		view.Op = h.operation("list_jobs")
	}
	if view.Op == nil && len(view.Groups) > 0 {
		view.Op = view.Groups[0].Ops[0]
	}
	if view.Op != nil {
		view.Body = view.Op.Body
		for _, p := range view.Op.Params {
			if p.Name == "limit" {
				view.Values[p.Field()] = "5"
			}
		}
	}
	if ex, ok := h.sessions.explorer(v.sess.ID); ok {
		view.Explorer = ex.ID
	}
	return view
}

func (h *Handler) explorer(w http.ResponseWriter, r *http.Request, v *visit) error {
	view := h.explorerView(v, r.URL.Query().Get("op"))
	h.render(w, r, v, http.StatusOK, "explorer", "Explorer", view)
	return nil
}

// send relays one request to the sandbox with the session's sandbox
// credential. The request runs in this process, through the same server
// and handler chain as any /v1 call (so it is authenticated, rate limited
// and logged like one), and the token never leaves the server.
func (h *Handler) send(w http.ResponseWriter, r *http.Request, v *visit) error {
	wantsJSON := strings.Contains(r.Header.Get("Accept"), "application/json")
	view := h.explorerView(v, r.PostForm.Get("op"))
	op := h.operation(r.PostForm.Get("op"))
	switch {
	case op == nil:
		return pageErr(http.StatusBadRequest, "Unknown operation", "Pick an operation from the list.")
	case op.Unsent != "":
		return pageErr(http.StatusBadRequest, "Not sent from the explorer", op.Method+" "+op.Path+": "+op.Unsent)
	}
	view.Op = op
	for _, p := range op.Params {
		view.Values[p.Field()] = r.PostForm.Get(p.Field())
	}
	view.Body = r.PostForm.Get("body")
	res, err := h.relay(r, v, op, view.Values, view.Body)
	var pe *pageError
	switch {
	case errors.As(err, &pe):
		res = &relayResult{Problem: pe.Message}
	case err != nil:
		return err
	}
	if ex, ok := h.sessions.explorer(v.sess.ID); ok {
		view.Explorer = ex.ID
	}
	if wantsJSON {
		w.Header().Set("Content-Type", "application/json")
		return json.NewEncoder(w).Encode(res)
	}
	view.Result = res
	h.render(w, r, v, http.StatusOK, "explorer", "Explorer", view)
	return nil
}

// maxRelayBody bounds the response body the explorer shows.
const maxRelayBody = 2 << 20

func (h *Handler) relay(r *http.Request, v *visit, op *operation, values map[string]string, body string) (*relayResult, error) {
	target := op.Path
	query := url.Values{}
	header := http.Header{}
	for _, p := range op.Params {
		val := strings.TrimSpace(values[p.Field()])
		switch p.In {
		case "path":
			if val == "" {
				return nil, pageErr(http.StatusBadRequest, "Missing parameter", "Fill in the path parameter "+p.Name+".")
			}
			// The value names one path segment, nothing more.
			if val == "." || val == ".." || strings.ContainsAny(val, "/\\?#") {
				return nil, pageErr(http.StatusBadRequest, "Invalid parameter", "The path parameter "+p.Name+" must be a single id.")
			}
			target = strings.ReplaceAll(target, "{"+p.Name+"}", url.PathEscape(val))
		case "query":
			if val != "" {
				query.Set(p.Name, val)
			}
		case "header":
			if val != "" {
				header.Set(p.Name, val)
			}
		}
	}
	if !strings.HasPrefix(target, "/v1/") {
		return nil, pageErr(http.StatusBadRequest, "Not an API route", "The explorer only sends requests to /v1.")
	}
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	srv, ok := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if !ok {
		return nil, errors.New("the console is not running inside a Caddy HTTP server")
	}
	token, cred, err := h.explorerToken(r.Context(), v)
	if err != nil {
		return nil, err
	}
	var rd *strings.Reader
	if op.Body != "" && strings.TrimSpace(body) != "" {
		rd = strings.NewReader(body)
		header.Set("Content-Type", "application/json")
	} else {
		rd = strings.NewReader("")
	}
	inner, err := http.NewRequestWithContext(r.Context(), op.Method, target, rd)
	if err != nil {
		return nil, pageErr(http.StatusBadRequest, "Invalid request", err.Error())
	}
	inner.Host, inner.RemoteAddr, inner.TLS, inner.RequestURI = r.Host, r.RemoteAddr, r.TLS, target
	inner.Header = header
	inner.Header.Set("Authorization", "Bearer "+token)
	inner.Header.Set("Accept", "application/json")
	inner.Header.Set("User-Agent", "practicegw-console-explorer")

	rec := &capture{header: http.Header{}}
	start := time.Now()
	srv.ServeHTTP(rec, inner)
	res := &relayResult{Method: op.Method, URL: target, Status: rec.code(), DurationMS: time.Since(start).Milliseconds(),
		Truncated: rec.truncated, Credential: cred}
	res.StatusText = codeText(res.Status)
	res.Class = codeClass(res.Status)
	names := make([]string, 0, len(rec.header))
	for k := range rec.header {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		for _, val := range rec.header[k] {
			res.Headers = append(res.Headers, [2]string{k, val})
		}
	}
	res.Body = prettyJSON(rec.body.Bytes())
	return res, nil
}

// explorerToken returns the session's sandbox token, issuing a credential
// on first use (or when the one it had was revoked).
func (h *Handler) explorerToken(ctx context.Context, v *visit) (token, id string, err error) {
	if ex, ok := h.sessions.explorer(v.sess.ID); ok {
		if c, err := h.registry.Authenticate(ctx, ex.token); err == nil && c.Sandbox {
			return ex.token, ex.ID, nil
		}
	}
	h.tidy(ctx, v.firm.ID)
	c, tok, err := h.registry.Issue(ctx, auth.IssueRequest{Firm: v.firm.ID, Name: explorerName,
		Scopes: explorerScopes(), Sandbox: true})
	if err != nil {
		return "", "", fmt.Errorf("issuing the explorer's sandbox credential: %w", err)
	}
	h.logger.Info("console issued an explorer credential", zap.String("credential_id", c.ID), zap.String("by", v.cred.ID))
	replaced, ok := h.sessions.setExplorer(v.sess.ID, &explorerCredential{ID: c.ID, token: tok})
	if replaced != nil {
		h.revokeExplorer(ctx, replaced)
	}
	if !ok {
		// The session ended meanwhile; nobody will use the credential.
		h.revokeExplorer(ctx, &explorerCredential{ID: c.ID})
		return "", "", pageErr(http.StatusUnauthorized, "Signed out", "Your session ended; sign in again.")
	}
	return tok, c.ID, nil
}

// capture records a relayed response, keeping at most maxRelayBody bytes.
type capture struct {
	header    http.Header
	status    int
	body      bytes.Buffer
	truncated bool
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

func (c *capture) Write(p []byte) (int, error) {
	c.WriteHeader(http.StatusOK)
	if room := maxRelayBody - c.body.Len(); len(p) > room {
		c.body.Write(p[:room])
		c.truncated = true
		return len(p), nil
	}
	return c.body.Write(p)
}

func (c *capture) code() int {
	if c.status == 0 {
		return http.StatusOK
	}
	return c.status
}

func (h *Handler) trigger(w http.ResponseWriter, r *http.Request, v *visit) error {
	kind := r.PostForm.Get("event")
	back := "/console/explorer?op=" + url.QueryEscape(r.PostForm.Get("op")) + "#triggers"
	if !slices.Contains(subscribableKinds(), kind) {
		h.sessions.addFlash(v.sess.ID, flash{Kind: "bad", Text: fmt.Sprintf("%q is not an event kind.", kind)})
		return redirect(w, r, back)
	}
	t, err := h.sandbox.Trigger(r.Context(), v.firm.ID, kind)
	var invalid *practice.InvalidError
	switch {
	case errors.As(err, &invalid):
		h.sessions.addFlash(v.sess.ID, flash{Kind: "bad", Text: invalid.Message})
	case err != nil:
		return err
	default:
		h.logger.Info("console triggered a sandbox event", zap.String("event", kind), zap.String("event_id", t.EventID),
			zap.String("by", v.cred.ID))
		h.sessions.addFlash(v.sess.ID, flash{Kind: "ok",
			Text: fmt.Sprintf("Raised %s in the sandbox: event %s (on %s).", kind, t.EventID, t.Resource),
			Link: "/console/events/" + t.EventID, LinkText: "See its deliveries"})
	}
	return redirect(w, r, back)
}

// sandboxKinds are the event names a sandbox change can raise: every one
// but the removals, since the sandbox's records are never removed.
func sandboxKinds() []string {
	var out []string
	for _, k := range dispatcher.Catalog() {
		if !k.Removal {
			out = append(out, k.Name)
		}
	}
	return out
}
