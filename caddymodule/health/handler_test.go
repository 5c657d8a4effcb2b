package health

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

type checks []Check

func (c checks) Readiness(context.Context) []Check { return c }

// The probe says what is down in words anyone may read; the error behind
// it (here naming a host and a user) goes to the log once, when the check
// starts failing, not into the answer and not on every probe.
func TestReadyzLeavesErrorsToTheLog(t *testing.T) {
	secret := errors.New("dial tcp 10.1.2.3:6379: NOAUTH user practicegw-prod")
	core, logs := observer.New(zap.DebugLevel)
	h := &Handler{Timeout: 1e9, logger: zap.New(core), failing: &failing{names: map[string]bool{}},
		checker: checks{{Name: "store", Critical: true, OK: true}, {Name: "redis", Critical: true, Detail: "Redis does not answer", Err: secret}}}
	for range 3 {
		rec := httptest.NewRecorder()
		if err := h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil), nil); err != nil {
			t.Fatal(err)
		}
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "Redis does not answer") {
			t.Fatalf("%d %s", rec.Code, rec.Body)
		}
		if strings.Contains(rec.Body.String(), "10.1.2.3") || strings.Contains(rec.Body.String(), "NOAUTH") {
			t.Fatalf("the probe's answer shows the error: %s", rec.Body)
		}
	}
	failing := logs.FilterMessage("readiness check failing").All()
	if len(failing) != 1 || !strings.Contains(failing[0].ContextMap()["error"].(string), "NOAUTH") {
		t.Fatalf("logged %v, want the error once", logs.All())
	}
}
