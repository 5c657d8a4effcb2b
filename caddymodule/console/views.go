package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/store/connection"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// pages are the templates that render a whole page; each is parsed with
// the layout and the shared partials.
var pages = []string{"signin", "error", "overview", "webhooks", "endpoint", "delivery", "event",
	"explorer", "traffic", "access", "credential", "revoke", "systems", "consent", "disconnect", "stagemap"}

// views holds the parsed templates and the assets' version.
type views struct {
	pages   map[string]*template.Template
	version string // changes whenever an asset does, for cache busting
}

func loadViews(now func() time.Time) (*views, error) {
	v := &views{pages: map[string]*template.Template{}}
	funcs := templateFuncs(now)
	for _, name := range pages {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS,
			"templates/layout.html", "templates/partials.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("parsing the %s page: %w", name, err)
		}
		v.pages[name] = t
	}
	sum := sha256.New()
	err := fs.WalkDir(assetFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := assetFS.ReadFile(p)
		sum.Write(b)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("reading the console's assets: %w", err)
	}
	v.version = hex.EncodeToString(sum.Sum(nil))[:12]
	return v, nil
}

// page is what the layout renders around a view.
type page struct {
	Title   string
	Nav     string
	Signed  bool
	Firm    string
	FirmID  string
	Admin   string // the signed-in credential's name
	AdminID string
	CSRF    string
	Flashes []flash
	// Reconnect are the firm's connections that need reconnecting, for
	// the banner every page shows.
	Reconnect []connection.View
	Assets    string
	View      any
}

// navFor maps a page to the nav item it sits under.
var navFor = map[string]string{
	"overview": "overview", "webhooks": "webhooks", "endpoint": "webhooks", "delivery": "webhooks", "event": "webhooks",
	"explorer": "explorer", "traffic": "traffic", "access": "access", "credential": "access", "revoke": "access",
	"systems": "systems", "consent": "systems", "disconnect": "systems", "stagemap": "systems",
}

// render writes a page. It renders into a buffer first, so that a
// template error becomes a plain 500 rather than half a page.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, v *visit, status int, name, title string, view any) {
	p := page{Title: title, Nav: navFor[name], Assets: h.views.version, View: view}
	if v != nil {
		p.Signed, p.Firm, p.FirmID, p.Admin, p.AdminID = true, v.firm.Name, v.firm.ID, v.cred.Name, v.cred.ID
		p.CSRF = v.csrf
		p.Flashes = h.sessions.takeFlashes(v.sess.ID)
		p.Reconnect = h.needsReconnect(r.Context(), v.firm.ID)
	}
	var buf bytes.Buffer
	if err := h.views.pages[name].ExecuteTemplate(&buf, "layout", p); err != nil {
		h.logger.Error("rendering a console page", zap.String("page", name), zap.Error(err))
		http.Error(w, "The console could not render this page.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// asset serves an embedded stylesheet or script. Links carry the assets'
// version, so a versioned asset may be cached for good.
func (h *Handler) asset(w http.ResponseWriter, r *http.Request) {
	b, err := assetFS.ReadFile(path.Join("assets", path.Base(r.PathValue("name"))))
	if err != nil {
		h.public(h.notFound)(w, r)
		return
	}
	name := r.PathValue("name")
	w.Header().Set("Content-Type", mime.TypeByExtension(path.Ext(name)))
	if r.URL.Query().Get("v") == h.views.version {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		w.Header().Set("Cache-Control", "public, max-age=300")
	}
	w.Write(b)
}

func templateFuncs(now func() time.Time) template.FuncMap {
	return template.FuncMap{
		"rel":      func(t time.Time) string { return relTime(t, now()) },
		"relp":     func(t *time.Time) string { return relTimePtr(t, now()) },
		"utc":      func(t time.Time) string { return t.UTC().Format("2 Jan 2006 15:04:05 UTC") },
		"iso":      func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"num":      func(n int64) string { return thousands(n) },
		"int":      func(n int) int64 { return int64(n) },
		"int64u":   func(n uint64) int64 { return int64(min(n, math.MaxInt64)) },
		"pct":      percent,
		"ms":       millis,
		"pretty":   prettyJSON,
		"stateCls": stateClass,
		"connCls":  statusClass,
		"syncCls":  syncClass,
		"sysName":  api.SystemName,
		"codeCls":  codeClass,
		"codeText": codeText,
		"add":      func(a, b int) int { return a + b },
		"label":    func(a dispatcher.Attempt) string { return a.Label() },
		"last":     lastAttempt,
		"note":     attemptNote,
		"rateCls":  rateClass,
		"trunc":    truncate,
		"meter":    meterOf,
		"int64f":   func(f float64) int64 { return int64(math.Round(f)) },
		"deref":    func(t *time.Time) time.Time { return *t },
		"rows":     func(s string) int { return min(max(strings.Count(s, "\n")+2, 4), 24) },
		"plain":    readmodel.Plainly,
		"capital":  capital,
	}
}

// capital starts s with a capital letter.
func capital(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// lastAttempt is a delivery's latest attempt, or nil.
func lastAttempt(d dispatcher.Delivery) *dispatcher.Attempt {
	if len(d.Attempts) == 0 {
		return nil
	}
	return &d.Attempts[len(d.Attempts)-1]
}

// rateClass colours a success rate by itself, whatever the endpoint's
// state now: a recovered endpoint's day can still have been bad.
func rateClass(rate float64) string {
	switch {
	case rate < 0:
		return "idle"
	case rate < 0.9:
		return "bad"
	case rate < 0.99:
		return "warn"
	}
	return "ok"
}

// attemptNote is an attempt's error, unless it only restates the response
// code shown beside it.
func attemptNote(a dispatcher.Attempt) string {
	if a.ResponseCode != 0 && a.Error == "the endpoint answered "+codeText(a.ResponseCode) {
		return ""
	}
	return a.Error
}

// truncate cuts s to about n characters, on a rune boundary.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// meter is a small horizontal gauge.
type meter struct {
	Width float64 // 0..100
	Class string
}

func meterOf(frac float64, class string) meter {
	return meter{Width: math.Round(min(max(frac, 0), 1)*1000) / 10, Class: class}
}

// relTime says how long ago (or until) t is, the way people say it.
func relTime(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t)
	future := d < 0
	if future {
		d = -d
	}
	var s string
	switch {
	case d < 45*time.Second:
		return "just now"
	case d < 90*time.Minute:
		s = plural(int64(math.Round(d.Minutes())), "min", "min")
	case d < 36*time.Hour:
		s = plural(int64(math.Round(d.Hours())), "hour", "hours")
	case d < 60*24*time.Hour:
		s = plural(int64(math.Round(d.Hours()/24)), "day", "days")
	default:
		return "on " + t.UTC().Format("2 Jan 2006")
	}
	if future {
		return "in " + s
	}
	return s + " ago"
}

func relTimePtr(t *time.Time, now time.Time) string {
	if t == nil {
		return "never"
	}
	return relTime(*t, now)
}

func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.FormatInt(n, 10) + " " + many
}

// thousands writes n with thin grouping commas: 7200 -> 7,200.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// percent renders a fraction; a negative one means there is nothing to
// measure.
func percent(f float64) string {
	switch {
	case f < 0:
		return "—"
	case f >= 1:
		return "100%"
	case f > 0.999:
		return "99.9%"
	}
	return strconv.FormatFloat(math.Floor(f*1000)/10, 'f', -1, 64) + "%"
}

func millis(ms int64) string {
	if ms < 1000 {
		return strconv.FormatInt(ms, 10) + " ms"
	}
	return strconv.FormatFloat(float64(ms)/1000, 'f', 1, 64) + " s"
}

func prettyJSON(raw []byte) string {
	var out bytes.Buffer
	if err := json.Indent(&out, raw, "", "  "); err != nil {
		return string(raw)
	}
	return out.String()
}

func stateClass(s dispatcher.State) string {
	switch s {
	case dispatcher.StateDelivered:
		return "ok"
	case dispatcher.StateFailed:
		return "bad"
	case dispatcher.StateRetrying:
		return "warn"
	}
	return "idle"
}

func codeClass(code int) string {
	switch {
	case code >= 200 && code < 300:
		return "ok"
	case code == 0:
		return "bad"
	case code == 429 || (code >= 300 && code < 500):
		return "warn"
	}
	return "bad"
}

// codeText names a response code, or says none came.
func codeText(code int) string {
	if code == 0 {
		return "no response"
	}
	if t := http.StatusText(code); t != "" {
		return strconv.Itoa(code) + " " + t
	}
	return strconv.Itoa(code)
}
