// Package apierror writes the one error body every practicegw route answers
// with, and gives each request its Request-Id.
package apierror

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"net/http"
)

// Error is the machine-readable part of an error response.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
	// MappedStages are the stages the firm's system maps, which a job
	// can be moved to: with an invalid_stage refusal of one it does not.
	MappedStages []string `json:"mapped_stages,omitempty"`
	// Header is added to the response, such as Allow or Retry-After.
	Header http.Header `json:"-"`
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// New builds an error; message is one human sentence.
func New(status int, code, message string) *Error {
	return &Error{Status: status, Code: code, Message: message}
}

// WithParam names the request parameter at fault.
func (e *Error) WithParam(param string) *Error {
	c := *e
	c.Param = param
	return &c
}

// WithHeader adds a response header to the error.
func (e *Error) WithHeader(key, value string) *Error {
	c := *e
	c.Header = c.Header.Clone()
	if c.Header == nil {
		c.Header = http.Header{}
	}
	c.Header.Set(key, value)
	return &c
}

type body struct {
	Error struct {
		*Error
		RequestID string `json:"request_id"`
	} `json:"error"`
}

// Write sends e as the JSON error body.
func Write(w http.ResponseWriter, _ *http.Request, e *Error) {
	out := Marshal(w, e)
	for k, v := range e.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", itoa(len(out)))
	w.WriteHeader(e.Status)
	w.Write(out)
}

// Marshal returns the error body for the response's request.
func Marshal(w http.ResponseWriter, e *Error) []byte {
	var b body
	b.Error.Error = e
	b.Error.RequestID = RequestID(w)
	// A message is read by people: "Bearer <token>" stays as written
	// rather than \u003ctoken\u003e (the body is JSON, never HTML).
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.Encode(b)
	return out.Bytes()
}

const requestIDHeader = "Request-Id"

// RequestID returns the response's Request-Id, giving it one first if the
// response has none yet. The first practicegw handler a request meets sets
// it, so every later one and the error body agree.
func RequestID(w http.ResponseWriter) string {
	h := w.Header()
	if v := h[requestIDHeader]; len(v) > 0 {
		return v[0]
	}
	id := newRequestID()
	h[requestIDHeader] = []string{id}
	return id
}

const base32 = "0123456789abcdefghjkmnpqrstvwxyz"

// newRequestID returns a fresh req_ identifier.
func newRequestID() string {
	var raw [16]byte
	rand.Read(raw[:])
	out := make([]byte, 4+16)
	copy(out, "req_")
	for i, b := range raw {
		out[4+i] = base32[b&31]
	}
	return string(out)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var buf [20]byte
	i := len(buf)
	for n > 0 {
		i--
		buf[i] = byte('0' + n%10)
		n /= 10
	}
	return string(buf[i:])
}
