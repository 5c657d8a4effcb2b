package api

import (
	"encoding/base64"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/caddymodule/apierror"
)

func jobsRoute(t testing.TB) *route {
	rt, _, _ := match(http.MethodGet, "/v1/jobs")
	if rt == nil {
		t.Fatal("no jobs route")
	}
	return rt
}

func TestParseQuery(t *testing.T) {
	rt := jobsRoute(t)
	for _, c := range []struct {
		raw, code, param string
		limit            int
	}{
		{"", "", "", 50},
		{"limit=200&stage=in_review", "", "", 200},
		{"limit=201", "parameter_invalid", "limit", 0},
		{"limit=-1", "parameter_invalid", "limit", 0},
		{"stage=x", "parameter_invalid", "stage", 0},
		{"owner=cli_1", "parameter_invalid", "owner", 0},
		{"client=cli_1&client=cli_2", "parameter_invalid", "client", 0},
		{"deadline_before=2026-02-30", "parameter_invalid", "deadline_before", 0},
		{"updated_since=2026-01-01", "parameter_invalid", "updated_since", 0},
		{"sort=asc", "parameter_unknown", "sort", 0},
		{"%zz", "parameter_invalid", "", 0},
	} {
		q, err := parseQuery(rt, c.raw)
		if c.code == "" {
			if err != nil || q.Limit != c.limit {
				t.Errorf("%q: %v, limit %d", c.raw, err, q.Limit)
			}
			continue
		}
		var e *apierror.Error
		if !errors.As(err, &e) || e.Code != c.code || e.Param != c.param || e.Status != 400 {
			t.Errorf("%q: got %v, want %s on %q", c.raw, err, c.code, c.param)
		}
	}
}

// A cursor is sealed: it opens only for the tenant, collection and
// filters it was given for, and an edited or forged one (a document
// store's token names the folder to read next) is refused.
func TestCursorIsSealed(t *testing.T) {
	rt := jobsRoute(t)
	cs := cursors{key: []byte("a key every instance shares, 32B")}
	q, err := parseQuery(rt, "stage=filed")
	if err != nil {
		t.Fatal(err)
	}
	const acme = "frm_acme/live"
	cur := cs.seal(acme, "/v1/jobs", q.fingerprint, "job_abc")
	if tok, err := cs.open(acme, "/v1/jobs", q.fingerprint, cur); err != nil || tok != "job_abc" {
		t.Fatalf("round trip: %q %v", tok, err)
	}
	reopen := func(raw string) (string, error) {
		q, err := parseQuery(rt, raw)
		if err != nil {
			return "", err
		}
		return cs.open(acme, "/v1/jobs", q.fingerprint, q.cursor)
	}
	if _, err := reopen("stage=filed&limit=10&cursor=" + cur); err != nil {
		t.Fatalf("same filters, another page size: %v", err)
	}
	if _, err := reopen("stage=planned&cursor=" + cur); err == nil {
		t.Fatal("cursor accepted with other filters")
	}
	if _, err := cs.open(acme, "/v1/clients", q.fingerprint, cur); err == nil {
		t.Fatal("cursor accepted by another collection")
	}
	if _, err := cs.open("frm_birch/live", "/v1/jobs", q.fingerprint, cur); err == nil {
		t.Fatal("cursor accepted for another firm")
	}
	if _, err := cs.open("frm_acme/sandbox", "/v1/jobs", q.fingerprint, cur); err == nil {
		t.Fatal("a live cursor accepted in the sandbox")
	}
	other := cursors{key: []byte("another gateway's key, not ours!")}
	if _, err := other.open(acme, "/v1/jobs", q.fingerprint, cur); err == nil {
		t.Fatal("cursor accepted under another key")
	}
	// An edited token: the MAC no longer matches.
	raw, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(cur, "cur_"))
	forged := "cur_" + base64.RawURLEncoding.EncodeToString(append(raw[:cursorMAC:cursorMAC], "/sites/root/../../other-firm"...))
	if _, err := cs.open(acme, "/v1/jobs", q.fingerprint, forged); err == nil {
		t.Fatal("a forged cursor was opened")
	}
}

func TestMatch(t *testing.T) {
	for _, c := range []struct {
		method, path, op, id string
		allow                int
	}{
		{"GET", "/v1/jobs", "list_jobs", "", 0},
		{"GET", "/v1/jobs/job_1", "get_job", "job_1", 0},
		{"POST", "/v1/jobs/job_1/stage", "move_job", "job_1", 0},
		{"GET", "/v1/jobs/job_1/stage", "", "", 1},
		{"DELETE", "/v1/clients/cli_1", "", "", 2},
		{"GET", "/v1/jobs//stage", "", "", 0},
		{"GET", "/v1/jobs/job_1/stage/x", "", "", 0},
		{"GET", "/v1", "", "", 0},
	} {
		rt, id, allow := match(c.method, c.path)
		op := ""
		if rt != nil {
			op = rt.op
		}
		if op != c.op || id != c.id || len(allow) != c.allow {
			t.Errorf("%s %s: %q %q %v", c.method, c.path, op, id, allow)
		}
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"", "limit=10", "stage=in_review&owner=usr_x", "cursor=cur_AAAAAGpvYnMAam9iXzE", "a=%zz", "deadline_after=2026-01-01"} {
		f.Add(s)
	}
	rt := jobsRoute(f)
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := parseQuery(rt, raw)
		if err != nil {
			var e *apierror.Error
			if !errors.As(err, &e) || e.Status != 400 {
				t.Fatalf("%q: %v is not a 400 API error", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > maxLimit {
			t.Fatalf("%q: limit %d", raw, q.Limit)
		}
	})
}

func FuzzCursor(f *testing.F) {
	f.Add("job_01abc", uint32(7), "cur_x")
	cs := cursors{key: []byte("fuzzing key")}
	f.Fuzz(func(t *testing.T, token string, fp uint32, garbage string) {
		if token != "" {
			cur := cs.seal("frm_acme/live", "/v1/jobs", fp, token)
			got, err := cs.open("frm_acme/live", "/v1/jobs", fp, cur)
			if err != nil || got != token {
				t.Fatalf("round trip of %q: %q %v", token, got, err)
			}
		}
		if got, err := cs.open("frm_acme/live", "/v1/jobs", fp, garbage); err == nil {
			t.Fatalf("%q opened to %q without the key", garbage, got)
		}
	})
}
