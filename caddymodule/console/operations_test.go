package console

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/practicegw/practicegw/caddymodule/api"
)

func TestExplorerOffersEveryRouteOfTheAPI(t *testing.T) {
	since := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	routes, err := api.Operations([]api.Deprecation{{Method: "POST", Path: "/v1/jobs/{id}/stage", Since: since,
		Sunset: since.AddDate(1, 0, 0)}})
	if err != nil {
		t.Fatal(err)
	}
	ops := operationsOf(routes)
	if len(ops) != len(routes) {
		t.Fatalf("%d operations from %d routes", len(ops), len(routes))
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
