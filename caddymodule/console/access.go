package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/auth"
	"github.com/practicegw/practicegw/caddymodule/ratelimit"
	"github.com/practicegw/practicegw/internal/envconfig"
	"github.com/practicegw/practicegw/store/credential"
)

// resources lists what scopes reach, in the order the console shows them.
var resources = []struct{ Name, Label string }{
	{"clients", "Clients"}, {"engagements", "Engagements"}, {"jobs", "Jobs"}, {"documents", "Documents"},
	{"invoices", "Invoices"}, {"people", "People"}, {"events", "Events"}, {"webhooks", "Webhooks"},
	{"admin", "Console & credentials"},
}

// scopeGroup is what a credential can do with one resource.
type scopeGroup struct {
	Resource string
	Access   string // "read", "read & write", "write", "full"
}

// groupScopes says what a credential can reach, resource by resource.
func groupScopes(scopes []string) []scopeGroup {
	var out []scopeGroup
	for _, res := range resources {
		if res.Name == "admin" {
			if slices.Contains(scopes, "admin") {
				out = append(out, scopeGroup{Resource: res.Label, Access: "manage"})
			}
			continue
		}
		read, write := slices.Contains(scopes, res.Name+":read"), slices.Contains(scopes, res.Name+":write")
		switch {
		case read && write:
			out = append(out, scopeGroup{Resource: res.Label, Access: "read & write"})
		case read:
			out = append(out, scopeGroup{Resource: res.Label, Access: "read"})
		case write:
			out = append(out, scopeGroup{Resource: res.Label, Access: "write"})
		}
	}
	return out
}

// scopeChoice is one resource's row of checkboxes in the issue form.
type scopeChoice struct {
	Label   string
	Options []scopeOption
}

type scopeOption struct {
	Scope   string
	Label   string
	Checked bool
}

func scopeChoices(checked []string) []scopeChoice {
	var out []scopeChoice
	for _, res := range resources {
		c := scopeChoice{Label: res.Label}
		for _, s := range auth.Scopes {
			name, access, _ := strings.Cut(s, ":")
			if name != res.Name {
				continue
			}
			if access == "" {
				access = "manage"
			}
			c.Options = append(c.Options, scopeOption{Scope: s, Label: access, Checked: slices.Contains(checked, s)})
		}
		if len(c.Options) > 0 {
			out = append(out, c)
		}
	}
	return out
}

// accessRow is one credential as the access page lists it.
type accessRow struct {
	Cred     *credential.Credential
	Groups   []scopeGroup
	Stale    bool
	Self     bool
	Explorer bool
}

func (h *Handler) accessRowOf(c *credential.Credential, v *visit) accessRow {
	return accessRow{Cred: c, Groups: groupScopes(c.Scopes), Stale: c.RevokedAt == nil && c.Stale(h.now()),
		Self: c.ID == v.cred.ID, Explorer: c.Name == explorerName && c.Sandbox}
}

type issueForm struct {
	Name      string
	RateLimit string
	Sandbox   bool
	Choices   []scopeChoice
	Problem   string
}

// defaultRate is the ceiling a credential issued without one gets: the
// environment's table, as the gateway fills its rate_limit.
func defaultRate() string { return envconfig.Value(os.LookupEnv, "PRACTICEGW_RATE_LIMIT") }

// DefaultRate is the form's placeholder for the rate limit.
func (issueForm) DefaultRate() string { return defaultRate() }

type accessView struct {
	Rows    []accessRow
	Active  int
	Stale   int
	Revoked int
	Form    issueForm
}

func (h *Handler) accessView(ctx context.Context, v *visit, form issueForm) (accessView, error) {
	creds, err := h.registry.List(ctx, v.firm.ID)
	if err != nil {
		return accessView{}, err
	}
	view := accessView{Form: form}
	var revoked []accessRow
	for _, c := range creds {
		row := h.accessRowOf(c, v)
		switch {
		case c.RevokedAt != nil:
			view.Revoked++
			revoked = append(revoked, row)
			continue
		case row.Stale:
			view.Stale++
		}
		view.Active++
		view.Rows = append(view.Rows, row)
	}
	// Stale credentials first: they are the ones to act on.
	slices.SortStableFunc(view.Rows, func(a, b accessRow) int {
		switch {
		case a.Stale && !b.Stale:
			return -1
		case b.Stale && !a.Stale:
			return 1
		}
		return 0
	})
	view.Rows = append(view.Rows, revoked...)
	return view, nil
}

func (h *Handler) access(w http.ResponseWriter, r *http.Request, v *visit) error {
	view, err := h.accessView(r.Context(), v, issueForm{Choices: scopeChoices(nil)})
	if err != nil {
		return err
	}
	h.render(w, r, v, http.StatusOK, "access", "Access", view)
	return nil
}

const maxNameLength = 80

func (h *Handler) issue(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	scopes := r.PostForm["scope"]
	form := issueForm{Name: strings.TrimSpace(r.PostForm.Get("name")), RateLimit: strings.TrimSpace(r.PostForm.Get("rate_limit")),
		Sandbox: r.PostForm.Get("sandbox") != "", Choices: scopeChoices(scopes)}
	switch {
	case form.Name == "":
		form.Problem = "Name the integration the credential is for, so you can tell it apart later."
	case len(form.Name) > maxNameLength:
		form.Problem = fmt.Sprintf("Keep the name under %d characters.", maxNameLength)
	case len(scopes) == 0:
		form.Problem = "Pick at least one scope: what the integration needs to reach, and no more."
	case form.Sandbox && slices.Contains(scopes, "admin"):
		form.Problem = "Sandbox credentials cannot carry the admin scope."
	}
	if form.Problem == "" && form.RateLimit != "" {
		if _, err := ratelimit.ParseRate(form.RateLimit); err != nil {
			form.Problem = "Rate limit: write it as N/h, N/m or N/s, such as " + defaultRate() + "."
		}
	}
	var (
		c     *credential.Credential
		token string
	)
	if form.Problem == "" {
		var err error
		c, token, err = h.registry.Issue(ctx, auth.IssueRequest{Firm: v.firm.ID, Name: form.Name, Scopes: scopes,
			Sandbox: form.Sandbox, RateLimit: form.RateLimit})
		if err != nil {
			form.Problem = "The credential could not be issued: " + err.Error()
		}
	}
	if form.Problem != "" {
		view, err := h.accessView(ctx, v, form)
		if err != nil {
			return err
		}
		h.render(w, r, v, http.StatusBadRequest, "access", "Access", view)
		return nil
	}
	h.logger.Info("console issued a credential", zap.String("credential_id", c.ID), zap.String("by", v.cred.ID))
	// The token waits in the session for the one page that shows it, so
	// that it is never in a URL and a reload cannot show it again.
	h.sessions.putIssued(v.sess.ID, c.ID, token)
	return redirect(w, r, "/console/access/"+c.ID)
}

// firmCredential returns one of the firm's credentials.
func (h *Handler) firmCredential(ctx context.Context, v *visit, id string) (*credential.Credential, error) {
	c, err := h.registry.Get(ctx, id)
	if errors.Is(err, credential.ErrNotFound) || (err == nil && c.Firm != v.firm.ID) {
		return nil, notFound("credential " + id)
	}
	return c, err
}

type credentialView struct {
	Row     accessRow
	Token   string
	Issued  bool
	Traffic *trafficRow
}

func (h *Handler) credentialPage(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	c, err := h.firmCredential(ctx, v, r.PathValue("id"))
	if err != nil {
		return err
	}
	view := credentialView{Row: h.accessRowOf(c, v)}
	view.Token, view.Issued = h.sessions.takeIssued(v.sess.ID, c.ID)
	if c.RevokedAt == nil {
		row, ok, err := h.trafficRowOf(ctx, c, true)
		if err != nil {
			return err
		}
		if ok {
			view.Traffic = &row
		}
	}
	h.render(w, r, v, http.StatusOK, "credential", c.Name, view)
	return nil
}

func (h *Handler) revokePage(w http.ResponseWriter, r *http.Request, v *visit) error {
	c, err := h.revocable(r.Context(), v, r.PathValue("id"))
	if err != nil {
		return err
	}
	h.render(w, r, v, http.StatusOK, "revoke", "Revoke "+c.Name, h.accessRowOf(c, v))
	return nil
}

func (h *Handler) revoke(w http.ResponseWriter, r *http.Request, v *visit) error {
	ctx := r.Context()
	c, err := h.revocable(ctx, v, r.PathValue("id"))
	if err != nil {
		return err
	}
	if _, err := h.registry.Revoke(ctx, c.ID); err != nil {
		return fmt.Errorf("revoking %s: %w", c.ID, err)
	}
	h.logger.Info("console revoked a credential", zap.String("credential_id", c.ID), zap.String("by", v.cred.ID))
	h.sessions.addFlash(v.sess.ID, flash{Kind: "ok",
		Text: fmt.Sprintf("Revoked %s (%s). Requests with its token are now refused with 401.", c.Name, c.ID)})
	return redirect(w, r, "/console/access")
}

// revocable returns a credential this administrator may revoke: one of the
// firm's, still standing, and not the one they are signed in with.
func (h *Handler) revocable(ctx context.Context, v *visit, id string) (*credential.Credential, error) {
	c, err := h.firmCredential(ctx, v, id)
	switch {
	case err != nil:
		return nil, err
	case c.ID == v.cred.ID:
		return nil, pageErr(http.StatusConflict, "That is your own credential",
			"You are signed in with this credential. Sign in with another admin credential to revoke it.")
	case c.RevokedAt != nil:
		return nil, pageErr(http.StatusConflict, "Already revoked",
			fmt.Sprintf("%s was revoked %s.", c.Name, relTime(*c.RevokedAt, h.now())))
	}
	return c, nil
}
