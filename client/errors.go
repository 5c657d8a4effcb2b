package client

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// APIError is an answer of the gateway that is not a success: its status,
// its error body (the contract's {"error":{code,message,request_id,param}})
// and, on a 429 or a 503, how long it asks to wait.
type APIError struct {
	StatusCode int
	Code       ErrorErrorCode
	Message    string
	RequestID  string
	// Param is the parameter at fault, when there is one.
	Param string
	// RetryAfter is the answer's Retry-After, zero when it has none.
	RetryAfter time.Duration
}

func (e *APIError) Error() string {
	msg := fmt.Sprintf("practicegw: %d %s: %s", e.StatusCode, e.Code, e.Message)
	if e.Param != "" {
		msg += " (" + e.Param + ")"
	}
	return msg + " [" + e.RequestID + "]"
}

// CheckResponse is nil for a success (2xx, or 304 to a conditional read)
// and the answer's *APIError otherwise. body is the answer's body, as the
// ...WithResponse methods keep it in their Body field:
//
//	r, err := c.GetJobWithResponse(ctx, id, nil)
//	if err == nil {
//		err = client.CheckResponse(r.HTTPResponse, r.Body)
//	}
func CheckResponse(resp *http.Response, body []byte) error {
	if resp.StatusCode/100 == 2 || resp.StatusCode == http.StatusNotModified {
		return nil
	}
	e := &APIError{StatusCode: resp.StatusCode}
	e.RetryAfter, _ = RetryAfter(resp.Header)
	var answer Error
	if err := json.Unmarshal(body, &answer); err != nil || answer.Error.Code == "" {
		// Not the gateway's error body: something in front of it answered.
		e.Code, e.Message = "", fmt.Sprintf("%s with no error body", resp.Status)
		return e
	}
	e.Code, e.Message, e.RequestID = answer.Error.Code, answer.Error.Message, answer.Error.RequestId
	if answer.Error.Param != nil {
		e.Param = *answer.Error.Param
	}
	return e
}
