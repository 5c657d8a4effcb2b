package api

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/practicegw/practicegw/caddymodule/apierror"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/store/connection"
)

// The consent's start link and callback. They carry no credential: the
// start link's proof is its token (single use, 10 minutes), the
// callback's its state (single use, bound to one connection, 10 minutes)
// and the cookie the start link gave the browser. The vendors' webhooks
// for connections come in by the front door of every vendor webhook,
// practicegw_ingest.

var (
	errInvalidState = apierror.New(http.StatusBadRequest, "invalid_state",
		"This consent link is not one the gateway is waiting for: it was used already, has expired (after 10 minutes) or was never sent; connect again from the console's Systems page.")
	errStartInvalid = apierror.New(http.StatusBadRequest, "invalid_state",
		"This consent link was opened already, has expired (after 10 minutes) or was never sent; connect again from the console's Systems page.")
	errConsentDenied = apierror.New(http.StatusBadRequest, "consent_denied",
		"Consent was refused at the vendor, so the system is not connected; connect again and allow access to connect it.")
	errConsentFailed = apierror.New(http.StatusBadGateway, "upstream_unavailable",
		"The vendor could not complete the consent; connect again from the console's Systems page.")
)

// startConsent follows a consent's start link: the cookie that binds the
// consent to this browser, and the vendor's consent page.
func (h *Handler) startConsent(w http.ResponseWriter, r *http.Request, c *call) error {
	svc, err := h.connectionService()
	if err == nil {
		var started connect.Started
		started, err = svc.Start(r.Context(), c.id, browserOf(r))
		if errors.Is(err, connection.ErrNotFound) {
			err = errStartInvalid
		}
		if err == nil {
			http.SetCookie(w, started.Cookie)
			hd := w.Header()
			// The Location carries the state: nothing keeps or forwards it.
			hd.Set("Cache-Control", "no-store")
			hd.Set("Referrer-Policy", "no-referrer")
			hd.Set("Location", started.Location)
			w.WriteHeader(http.StatusFound)
			return nil
		}
	}
	if !wantsHTML(r) {
		return err
	}
	e := h.toAPIError(r, err)
	return writeCallbackPage(w, e.Status, callbackPage{Console: "/console/systems", Error: e, RequestID: apierror.RequestID(w)})
}

// browserOf is the value of the request's consent cookie, "" without one.
func browserOf(r *http.Request) string {
	if c, err := r.Cookie(connect.BrowserCookie); err == nil {
		return c.Value
	}
	return ""
}

func (h *Handler) connectCallback(w http.ResponseWriter, r *http.Request, _ *call) error {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return invalidParam("state", "The query string is not valid URL encoding.")
	}
	v, err := h.finishConsent(r.Context(), q, browserOf(r))
	if !wantsHTML(r) {
		if err != nil {
			return err
		}
		return writeJSON(w, http.StatusOK, connectionObject(v))
	}
	page := callbackPage{Console: "/console/systems"}
	status := http.StatusOK
	if err != nil {
		e := h.toAPIError(r, err)
		status, page.Error, page.RequestID = e.Status, e, apierror.RequestID(w)
	} else {
		page.System, page.Firm, page.Status = SystemName(v.System), h.firmName(v.Firm), string(v.Status)
		page.Organisation, page.Word = v.OrganisationName, OrganisationWord(v.Role, v.System)
	}
	return writeCallbackPage(w, status, page)
}

// finishConsent hands the vendor's redirect to the connection service
// and names its refusals as the contract does.
func (h *Handler) finishConsent(ctx context.Context, q url.Values, browser string) (connection.View, error) {
	svc, err := h.connectionService()
	if err != nil {
		return connection.View{}, err
	}
	if q.Get("state") == "" {
		return connection.View{}, errInvalidState.WithParam("state")
	}
	// The service sees a refusal too: it spends the state, so that the
	// link cannot be replayed, and keeps the connection pending.
	v, err := svc.Callback(ctx, q, browser)
	var apiErr *apierror.Error
	switch {
	case errors.Is(err, connection.ErrNotFound), errors.Is(err, connection.ErrOtherBrowser):
		return connection.View{}, errInvalidState.WithParam("state")
	case errors.As(err, &apiErr):
		return connection.View{}, err
	case q.Get("error") == "access_denied":
		return connection.View{}, errConsentDenied
	case q.Get("error") != "":
		return connection.View{}, errConsentFailed
	case err != nil:
		return connection.View{}, err
	}
	return v, nil
}

func (h *Handler) firmName(firm string) string {
	if h.firms != nil {
		if n, ok := h.firms.FirmName(firm); ok && n != "" {
			return n
		}
	}
	return firm
}

// wantsHTML reports whether the request is a browser's: its Accept names
// an HTML type.
func wantsHTML(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		mt, _, _ := strings.Cut(strings.TrimSpace(part), ";")
		if mt == "text/html" || mt == "application/xhtml+xml" {
			return true
		}
	}
	return false
}

// callbackPage is what the browser is shown after consent.
type callbackPage struct {
	System, Firm, Status, Organisation string
	// Word is the vendor's word for what the grant reaches ("site").
	Word      string
	Console   string
	Error     *apierror.Error
	RequestID string
}

//go:embed connections_callback.html
var callbackHTML string

var callbackTemplate = template.Must(template.New("callback").Parse(callbackHTML))

// writeCallbackPage answers the page. The callback's URL holds the
// vendor's code: no referrer leaves it, and nothing caches the page.
func writeCallbackPage(w http.ResponseWriter, status int, page callbackPage) error {
	var buf bytes.Buffer
	if err := callbackTemplate.Execute(&buf, page); err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'")
	w.WriteHeader(status)
	_, err := w.Write(buf.Bytes())
	return err
}
