package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/practicegw/practicegw/client"
)

// The first calls: a client with a credential's token, a filtered page of
// jobs, a job moved to another stage.
func Example() {
	ctx := context.Background()
	c, err := client.NewClientWithResponses(gatewayURL, client.WithToken(sandboxToken))
	if err != nil {
		panic(err)
	}
	stage := client.ListJobsParamsStageInProgress
	page, err := c.ListJobsWithResponse(ctx, &client.ListJobsParams{Stage: &stage, Limit: client.Ptr(2)})
	if err != nil {
		panic(err)
	}
	fmt.Println(page.StatusCode(), len(page.JSON200.Data), page.JSON200.HasMore)
	job, err := page.JSON200.Data[0].AsJob()
	if err != nil {
		panic(err)
	}
	moved, err := c.MoveJobWithResponse(ctx, job.Id, nil, client.StageMove{Stage: client.StageMoveStageInReview, Note: client.Ptr("Ready for partner review")})
	if err != nil {
		panic(err)
	}
	fmt.Println(moved.StatusCode(), moved.JSON200.Stage)
	// Output:
	// 200 2 true
	// 200 in_review
}

// A walk over every page of a collection, 200 items a page: the iterator
// follows next_cursor until has_more is false.
func ExampleAll() {
	ctx := context.Background()
	c, err := client.NewClient(gatewayURL, client.WithToken(sandboxToken))
	if err != nil {
		panic(err)
	}
	jobs, owners := 0, map[string]bool{}
	for job, err := range client.All[client.Job](ctx, c.ListJobs, &client.ListJobsParams{Limit: client.Ptr(200)}) {
		if err != nil {
			panic(err)
		}
		jobs++
		if job.Owner != nil { // null: no one is responsible for it
			owners[*job.Owner] = true
		}
	}
	fmt.Println(jobs, "jobs,", len(owners), "owners")
	// Output: 1000 jobs, 20 owners
}

// A removed record's tombstone, listed with include_deleted=true among the
// records: the item is either, and Tombstoned tells which.
func ExampleTombstoned() {
	ctx := context.Background()
	c, err := client.NewClient(gatewayURL, client.WithToken(liveToken))
	if err != nil {
		panic(err)
	}
	records := 0
	for item, err := range client.All[client.JobOrTombstone](ctx, c.ListJobs, &client.ListJobsParams{IncludeDeleted: client.Ptr(true)}) {
		if err != nil {
			panic(err)
		}
		if t, ok := client.Tombstoned(item); ok {
			fmt.Println("removed:", t.Id, t.Object, t.Deleted, t.Version > 1)
			continue
		}
		if _, err := item.AsJob(); err != nil {
			panic(err)
		}
		records++
	}
	fmt.Println(records, "jobs")
	// Output:
	// removed: job_W0003 job true true
	// 11 jobs
}

// Creating a client twice with one Idempotency-Key creates it once: the
// second answer replays the first.
func ExampleClientWithResponses_CreateClientWithResponse() {
	ctx := context.Background()
	c, err := client.NewClientWithResponses(gatewayURL, client.WithToken(sandboxToken))
	if err != nil {
		panic(err)
	}
	key := &client.CreateClientParams{IdempotencyKey: client.Ptr("example-create-1")}
	body := client.ClientCreate{Name: "Hollis & Wray Ltd", Contacts: &[]client.Contact{{Name: "Dana Hollis", Role: "primary"}}}
	first, err := c.CreateClientWithResponse(ctx, key, body)
	if err != nil {
		panic(err)
	}
	again, err := c.CreateClientWithResponse(ctx, key, body)
	if err != nil {
		panic(err)
	}
	fmt.Println(first.StatusCode(), again.StatusCode(), first.JSON201.Id == again.JSON201.Id, again.JSON201.Name)
	// Output: 201 201 true Hollis & Wray Ltd
}

// Errors are typed: the ...WithResponse methods decode an error body into
// the field of its status, and CheckResponse makes any answer that is not
// a success an *APIError.
func ExampleCheckResponse() {
	ctx := context.Background()
	c, err := client.NewClientWithResponses(gatewayURL, client.WithToken(sandboxToken))
	if err != nil {
		panic(err)
	}
	bad, err := c.CreateClientWithResponse(ctx, nil, client.ClientCreate{Name: ""})
	if err != nil {
		panic(err)
	}
	fmt.Println(bad.StatusCode(), bad.JSON400.Error.Code == client.ParameterInvalid, *bad.JSON400.Error.Param)

	missing, err := c.GetJobWithResponse(ctx, "job_nosuchjob", nil)
	if err != nil {
		panic(err)
	}
	var apiErr *client.APIError
	if errors.As(client.CheckResponse(missing.HTTPResponse, missing.Body), &apiErr) {
		fmt.Println(apiErr.StatusCode, apiErr.Code, apiErr.RequestID != "")
	}
	// Output:
	// 400 true name
	// 404 resource_not_found true
}

// Every answer says what is left of the credential's ceiling; past it, a
// 429 says when to try again.
func ExampleRateLimitOf() {
	ctx := context.Background()
	c, err := client.NewClient(gatewayURL, client.WithToken(limitedToken)) // 1 request a minute
	if err != nil {
		panic(err)
	}
	for range 2 {
		resp, err := c.ListJobs(ctx, &client.ListJobsParams{Limit: client.Ptr(1)})
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		rl, _ := client.RateLimitOf(resp.Header)
		fmt.Println(resp.StatusCode, rl.Policy, rl.Limit, rl.Window, rl.Remaining)
		var apiErr *client.APIError
		if errors.As(client.CheckResponse(resp, body), &apiErr) {
			fmt.Println(apiErr.Code, apiErr.RetryAfter > 0 && apiErr.RetryAfter <= time.Minute)
		}
	}
	// Output:
	// 200 default 1 1m0s 0
	// 429 default 1 1m0s 0
	// rate_limited true
}

// A webhook receiver verifies each delivery's Standard Webhooks signature
// with the endpoint's secret before it trusts the event.
func ExampleVerifyWebhook() {
	ctx := context.Background()
	c, err := client.NewClientWithResponses(gatewayURL, client.WithToken(sandboxToken))
	if err != nil {
		panic(err)
	}
	secret := make(chan string, 1)
	received := make(chan string, 1)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		ev, err := client.VerifyWebhook(<-secret, r.Header, body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			received <- err.Error()
			return
		}
		name, _ := ev.Discriminator()
		received <- "verified " + name
	}))
	defer receiver.Close()

	ep, err := c.CreateWebhookEndpointWithResponse(ctx, nil, client.EndpointCreate{
		Url: receiver.URL + "/hooks", Events: []string{"job.stage_changed"}})
	if err != nil {
		panic(err)
	}
	secret <- ep.JSON201.Secret
	if _, err := c.TriggerSandboxEventWithResponse(ctx, nil, client.TriggerRequest{Event: "job.stage_changed"}); err != nil {
		panic(err)
	}
	select {
	case got := <-received:
		fmt.Println(got)
	case <-time.After(30 * time.Second):
		fmt.Println("no delivery")
	}
	// Output: verified job.stage_changed
}
