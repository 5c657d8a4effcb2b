// Package client is the official Go client of practicegw's /v1 API,
// generated from the OpenAPI document a gateway serves (client.gen.go,
// by oapi-codegen: see generate.go), with the few helpers the generator
// leaves out:
//
//   - [WithToken] sends a credential's token with every request, and [Ptr]
//     makes the pointers the generated optional fields take;
//   - [All] follows next_cursor to the end of a collection, as an iterator;
//   - [CheckResponse] turns an answer that is not a success into an
//     [*APIError], with the error body's code, message and request id;
//   - [VerifyWebhook] verifies a webhook delivery's Standard Webhooks
//     signature and decodes its event;
//   - [RateLimitOf] and [RetryAfter] read the RateLimit, RateLimit-Policy
//     and Retry-After headers.
//
// A client is made with the gateway's base URL, without /v1:
//
//	c, err := client.NewClientWithResponses("https://gw.example.com", client.WithToken(token))
//
// Each operation of the document is a method named after its operationId
// (ListJobs, CreateClient, MoveJob, ...). The ...WithResponse methods
// decode the answer into the field of its status (JSON200, JSON400, ...);
// the others return the *http.Response.
//
// A version of this package goes with the API version its document
// describes: docs/CONTRACT.md says which.
package client
