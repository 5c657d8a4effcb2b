package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/caddymodule/api"
)

// The explorer knows every /v1 route of the API and nothing else (the
// consent's browser side is no API call), and offers to send exactly
// those its sandbox credential reaches with one answer: not the admin
// routes, which need a live credential, nor the event stream.
func TestExplorerOffersWhatItCanSend(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	routes, err := api.Operations([]api.Deprecation{{Method: "POST", Path: "/v1/jobs/{id}/stage", Since: since,
		Sunset: since.AddDate(1, 0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	ops := operationsOf(routes)
	v1 := 0
	for _, rt := range routes {
		if strings.HasPrefix(rt.Path, "/v1/") {
			v1++
		}
	}
	if len(ops) != v1 || v1 < 30 {
		t.Fatalf("%d operations from %d routes of /v1", len(ops), v1)
	}
	for _, op := range ops {
		unsent := op.Scope == "admin" || op.ID == "stream_events"
		if (op.Unsent != "") != unsent || !strings.HasPrefix(op.Path, "/v1/") {
			t.Errorf("%s %s (scope %q): unsent %q", op.Method, op.Path, op.Scope, op.Unsent)
		}
	}
	byID := map[string]operation{}
	for i, op := range ops {
		byID[op.ID] = op
		if i > 0 && tagRank(ops[i-1].Tag) > tagRank(op.Tag) {
			t.Errorf("%s (%s) comes after %s (%s)", op.ID, op.Tag, ops[i-1].ID, ops[i-1].Tag)
		}
	}
	create := byID["create_webhook_endpoint"]
	var body struct {
		URL    *string  `json:"url"`
		Events []string `json:"events"`
	}
	if err := json.Unmarshal([]byte(create.Body), &body); err != nil || body.URL == nil || body.Events == nil {
		t.Errorf("create_webhook_endpoint example body %q (%v)", create.Body, err)
	}
	if create.Scope != "webhooks:write" || create.Tag != "webhooks" {
		t.Errorf("create_webhook_endpoint: scope %q tag %q", create.Scope, create.Tag)
	}
	for _, op := range ops {
		if want := op.Method == "POST" && op.Path == "/v1/jobs/{id}/stage"; op.Deprecated != want {
			t.Errorf("%s %s deprecated: %v, want %v", op.Method, op.Path, op.Deprecated, want)
		}
	}
	jobs := byID["list_jobs"]
	var stage *opParam
	for i := range jobs.Params {
		if jobs.Params[i].Name == "stage" {
			stage = &jobs.Params[i]
		}
	}
	if stage == nil || stage.In != "query" || len(stage.Enum) == 0 {
		t.Errorf("list_jobs stage parameter: %+v", stage)
	}
}
