// Package apitest is the HTTP client Blueline's tests use against its API,
// and the webhook receiver they point the API's webhooks at.
//
// The end-to-end suite (package e2e) and the server package's own tests make
// their API requests through a Client (Call for the JSON API, Fetch for file
// links and requests Call would change), and the webhook tests (packages e2e
// and webhook) receive every delivery with a Receiver, so what crosses the
// API passes one place each way: a check that applies to every request,
// response and delivery (against the API document, say) belongs there, in
// Client.do and the Receiver's handler. Only tests import it.
package apitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
)

// Client makes API requests for a test.
type Client struct {
	TB   testing.TB
	Base string       // the API's root, such as "http://127.0.0.1:8080"
	HTTP *http.Client // nil means http.DefaultClient
	// Part says the server under test is a part of the API (a package's
	// own handler, as the files package's tests serve downloads) rather
	// than the daemon's whole API: its exchanges are not held to the API
	// document, whose headers the whole API's middleware adds.
	Part bool
}

// Response is an API answer: its status, headers and body, raw and, when
// there is one, decoded as a JSON object.
type Response struct {
	Status int
	Header http.Header
	Body   map[string]any
	Raw    []byte
}

// ErrCode is the code of an error response, "" for any other.
func (r Response) ErrCode() string { return r.errField("code") }

// ErrParam is the param of an error response, "" for any other.
func (r Response) ErrParam() string { return r.errField("param") }

// ErrType is the type of an error response, "" for any other.
func (r Response) ErrType() string { return r.errField("type") }

func (r Response) errField(name string) string {
	e, _ := r.Body["error"].(map[string]any)
	s, _ := e[name].(string)
	return s
}

// Data is the items of a list response.
func (r Response) Data() []map[string]any {
	items, _ := r.Body["data"].([]any)
	out := make([]map[string]any, len(items))
	for i, it := range items {
		out[i], _ = it.(map[string]any)
	}
	return out
}

// Call makes an API request with key as its bearer token (none when "").
// body may be nil, a string (sent as it is) or a value sent as JSON; a
// request with a body says it is JSON unless headers, name, value pairs set
// last, say otherwise. A "+" in the query is sent encoded, as a careful
// client does. A failed request or a body that is not a JSON object fails
// the test.
func (c Client) Call(method, path, key string, body any, headers ...string) Response {
	c.TB.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			c.TB.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	if p, q, ok := strings.Cut(path, "?"); ok {
		path = p + "?" + strings.ReplaceAll(q, "+", "%2B")
	}
	var sent []byte
	if rd != nil {
		sent, _ = io.ReadAll(rd)
		rd = bytes.NewReader(sent)
	}
	req, err := http.NewRequest(method, c.Base+path, rd)
	if err != nil {
		c.TB.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, raw := c.do(req, sent, headers)
	r := Response{Status: resp.StatusCode, Header: resp.Header, Raw: raw}
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &r.Body); err != nil {
			c.TB.Fatalf("%s %s: body is not a JSON object: %q", method, path, raw)
		}
	}
	return r
}

// Fetch requests a URL (whole, not under Base) without an API key, as a
// browser following a link does, and returns the response and its body,
// whatever that is; headers are name, value pairs.
func (c Client) Fetch(method, url string, headers ...string) (*http.Response, []byte) {
	c.TB.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		c.TB.Fatal(err)
	}
	return c.do(req, nil, headers)
}

// do sets the headers, name, value pairs, on req, sends it (with body, the
// bytes it carries), reads the answer and checks the exchange against the
// API document: every request of Call and Fetch passes here.
func (c Client) do(req *http.Request, body []byte, headers []string) (*http.Response, []byte) {
	c.TB.Helper()
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	resp, err := hc.Do(req)
	if err != nil {
		c.TB.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.TB.Fatal(err)
	}
	if !c.Part && strings.HasPrefix(req.URL.String(), c.Base) {
		c.check(req, body, resp, raw)
	}
	return resp, raw
}

var shared struct {
	once sync.Once
	v    *Validator
	err  error
}

func sharedValidator() (*Validator, error) {
	shared.once.Do(func() { shared.v, shared.err = NewValidator() })
	return shared.v, shared.err
}

// checkEvent holds a webhook delivery to the API document.
func checkEvent(r *http.Request, body []byte) error {
	v, err := sharedValidator()
	if err != nil {
		return err
	}
	return v.ValidateEvent(r.Context(), r.Header, body)
}

// check holds an exchange with the API to its document (package apidoc):
// the answer must be what the document says the operation answers with
// that status; a request the document refuses must not be accepted; and a
// route must be documented unless the API answered that it has none.
// Tests may send requests the document refuses, to see them refused.
func (c Client) check(req *http.Request, body []byte, resp *http.Response, raw []byte) {
	c.TB.Helper()
	v, err := sharedValidator()
	if err != nil {
		c.TB.Fatal(err)
	}
	err = v.Validate(req.Context(), req, body, resp.StatusCode, resp.Header, raw)
	what := req.Method + " " + req.URL.RequestURI()
	var routeErr *RouteError
	var reqErr *RequestError
	var respErr *ResponseError
	switch {
	case errors.As(err, &routeErr):
		if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			c.TB.Errorf("%s: answered %d, but the API document has no such operation: %v", what, resp.StatusCode, err)
		}
	case errors.As(err, &respErr):
		c.TB.Errorf("%s: the answer (%d) differs from the API document: %v\nbody: %s", what, resp.StatusCode, respErr, raw)
	case errors.As(err, &reqErr) && resp.StatusCode < 400:
		c.TB.Errorf("%s: answered %d to a request the API document refuses: %v", what, resp.StatusCode, reqErr)
	}
}

// Send posts a message (POST /v1/messages) and returns it; an answer
// other than 201 Created fails the test.
func (c Client) Send(key string, body map[string]any, headers ...string) map[string]any {
	c.TB.Helper()
	r := c.Call("POST", "/v1/messages", key, body, headers...)
	if r.Status != http.StatusCreated {
		c.TB.Fatalf("POST /v1/messages %v: %d %s", body, r.Status, r.Raw)
	}
	return r.Body
}

// CheckErrorType reports an error response whose type is not the one the
// API's table gives its status and code, or that has no message.
func CheckErrorType(t testing.TB, what string, r Response) {
	t.Helper()
	want := map[int]string{400: "invalid_request_error", 401: "authentication_error", 403: "authorization_error",
		404: "not_found_error", 409: "invalid_request_error", 413: "invalid_request_error", 429: "rate_limit_error"}[r.Status]
	if r.ErrCode() == "contact_has_not_messaged" {
		want = "invalid_request_error"
	}
	e, _ := r.Body["error"].(map[string]any)
	if msg, _ := e["message"].(string); e["type"] != want || msg == "" {
		t.Errorf("%s: error type %v, want %s (or no message): %s", what, e["type"], want, r.Raw)
	}
}

// WithFields copies m with each key, value pair of kv set; a nil value
// removes the key.
func WithFields(m map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}
