package apitest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/testkit"
)

const requestID = "req_abcdefghijklmnopqrstuvwxyz"

// server answers every request with status, body and the headers the API
// document asks of every answer, as the daemon's middleware adds them,
// unless header says otherwise; it records the last request.
type server struct {
	*httptest.Server
	mu   sync.Mutex
	last *http.Request
	body []byte
}

func newServer(t *testing.T, status int, body string, header ...string) *server {
	s := &server{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.last, s.body = r, b
		s.mu.Unlock()
		w.Header().Set("X-Request-Id", requestID)
		w.Header().Set("Cache-Control", "no-store")
		w.Header().Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *server) request() (*http.Request, []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last, s.body
}

func TestCallConformingAnswerPasses(t *testing.T) {
	srv := newServer(t, 200, `{"status":"ok"}`)
	rec := &testkit.Recorder{TB: t}
	var r apitest.Response
	testkit.Run(func() { r = apitest.Client{TB: rec, Base: srv.URL}.Call("GET", "/healthz", "", nil) })
	if f := rec.Failures(); len(f) > 0 {
		t.Fatalf("a conforming answer was reported: %v", f)
	}
	if r.Status != 200 || r.Body["status"] != "ok" || string(r.Raw) != `{"status":"ok"}` || r.Header.Get("X-Request-Id") != requestID {
		t.Errorf("response %+v", r)
	}
	req, _ := srv.request()
	if req.Header.Get("Authorization") != "" || req.Header.Get("Content-Type") != "" {
		t.Errorf("a call without key or body sent Authorization %q, Content-Type %q", req.Header.Get("Authorization"), req.Header.Get("Content-Type"))
	}
}

// Drift between the answer and the API document fails the test.
func TestCallReportsDrift(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		body   string
		header []string
	}{
		{"undocumented field", 200, `{"status":"ok","uptime":5}`, nil},
		{"wrong type", 200, `{"status":5}`, nil},
		{"missing field", 200, `{}`, nil},
		{"undocumented status", 201, `{"status":"ok"}`, nil},
		{"bad request ID header", 200, `{"status":"ok"}`, []string{"X-Request-Id", "nope"}},
		{"caching allowed", 200, `{"status":"ok"}`, []string{"Cache-Control", "max-age=60"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newServer(t, tc.status, tc.body, tc.header...)
			rec := &testkit.Recorder{TB: t}
			returned := testkit.Run(func() { apitest.Client{TB: rec, Base: srv.URL}.Call("GET", "/healthz", "", nil) })
			f := rec.Failures()
			if !returned || len(f) != 1 || !strings.Contains(f[0], "differs from the API document") || !strings.Contains(f[0], "GET /healthz") {
				t.Fatalf("returned %v, failures %q; want one report that the answer differs", returned, f)
			}
			if !strings.Contains(f[0], tc.body) {
				t.Errorf("the report does not show the body %s: %s", tc.body, f[0])
			}
		})
	}
}

// A part of the API (Part) is not held to the document.
func TestCallPartIsNotChecked(t *testing.T) {
	srv := newServer(t, 200, `{"status":5,"extra":true}`)
	rec := &testkit.Recorder{TB: t}
	var r apitest.Response
	testkit.Run(func() { r = apitest.Client{TB: rec, Base: srv.URL, Part: true}.Call("GET", "/healthz", "", nil) })
	if f := rec.Failures(); len(f) > 0 {
		t.Errorf("a part's answer was checked: %v", f)
	}
	if r.Body["extra"] != true {
		t.Errorf("body %v", r.Body)
	}
}

// A route the document lacks is drift unless the API said it has none.
func TestCallUndocumentedRoute(t *testing.T) {
	for _, tc := range []struct {
		status int
		report bool
	}{{200, true}, {404, false}, {405, false}} {
		t.Run(fmt.Sprint(tc.status), func(t *testing.T) {
			srv := newServer(t, tc.status, `{}`)
			rec := &testkit.Recorder{TB: t}
			testkit.Run(func() { apitest.Client{TB: rec, Base: srv.URL}.Call("GET", "/v1/nowhere", "", nil) })
			f := rec.Failures()
			if got := len(f) == 1 && strings.Contains(f[0], "has no such operation"); got != tc.report || (!tc.report && len(f) > 0) {
				t.Errorf("answered %d: failures %q, want a report: %v", tc.status, f, tc.report)
			}
		})
	}
}

// A request the document refuses must not be accepted; refused, it is fine.
func TestCallRefusedRequestAccepted(t *testing.T) {
	list := `{"data":[],"has_more":false,"next_cursor":null,"request_id":"` + requestID + `"}`
	srv := newServer(t, 200, list)
	rec := &testkit.Recorder{TB: t}
	c := apitest.Client{TB: rec, Base: srv.URL}
	testkit.Run(func() { c.Call("GET", "/v1/reactions?message_id=msg_1", "sk_test", nil) })
	if f := rec.Failures(); len(f) > 0 {
		t.Fatalf("a valid exchange was reported: %v", f)
	}
	testkit.Run(func() { c.Call("GET", "/v1/reactions", "sk_test", nil) }) // message_id is required
	f := rec.Failures()
	if len(f) != 1 || !strings.Contains(f[0], "answered 200 to a request the API document refuses") {
		t.Fatalf("failures %q, want the accepted invalid request reported", f)
	}

	bad := newServer(t, 400, `{"error":{"type":"invalid_request_error","code":"missing_required_parameter","message":"message_id is required","param":"message_id"},"request_id":"`+requestID+`"}`)
	rec = &testkit.Recorder{TB: t}
	var r apitest.Response
	testkit.Run(func() { r = apitest.Client{TB: rec, Base: bad.URL}.Call("GET", "/v1/reactions", "sk_test", nil) })
	if f := rec.Failures(); len(f) > 0 {
		t.Errorf("an invalid request refused with a documented 400 was reported: %v", f)
	}
	if r.ErrCode() != "missing_required_parameter" || r.ErrParam() != "message_id" || r.ErrType() != "invalid_request_error" {
		t.Errorf("error fields %q %q %q", r.ErrCode(), r.ErrParam(), r.ErrType())
	}
	apitest.CheckErrorType(t, "GET /v1/reactions", r)
}

// Call sends the key, a JSON body with its type, a string body as it is,
// extra headers last, and a "+" in the query encoded.
func TestCallSends(t *testing.T) {
	srv := newServer(t, 200, `{}`)
	c := apitest.Client{TB: t, Base: srv.URL, Part: true}

	c.Call("POST", "/v1/x?to=+15551110001&a=b", "sk_key", map[string]any{"text": "hé"})
	req, body := srv.request()
	if req.Method != "POST" || req.URL.Path != "/v1/x" || req.URL.RawQuery != "to=%2B15551110001&a=b" {
		t.Errorf("sent %s %s?%s", req.Method, req.URL.Path, req.URL.RawQuery)
	}
	if req.URL.Query().Get("to") != "+15551110001" {
		t.Errorf("the server read to=%q", req.URL.Query().Get("to"))
	}
	if req.Header.Get("Authorization") != "Bearer sk_key" || req.Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers %v", req.Header)
	}
	var sent map[string]any
	if err := json.Unmarshal(body, &sent); err != nil || sent["text"] != "hé" {
		t.Errorf("body %s (%v)", body, err)
	}

	c.Call("PUT", "/v1/y", "", "not json at all", "Content-Type", "text/plain", "X-Extra", "1", "dangling")
	req, body = srv.request()
	if string(body) != "not json at all" || req.Header.Get("Content-Type") != "text/plain" || req.Header.Get("X-Extra") != "1" {
		t.Errorf("sent %q with headers %v", body, req.Header)
	}
	if req.Header.Get("Authorization") != "" {
		t.Errorf("a call without key sent Authorization %q", req.Header.Get("Authorization"))
	}
}

func TestCallFatalFailures(t *testing.T) {
	notJSON := newServer(t, 200, `[1,2]`)
	rec := &testkit.Recorder{TB: t}
	if testkit.Run(func() { apitest.Client{TB: rec, Base: notJSON.URL, Part: true}.Call("GET", "/", "", nil) }) {
		t.Error("Call returned on an answer that is not a JSON object")
	}
	if f := rec.Failures(); rec.Fatals() != 1 || !strings.Contains(f[0], "body is not a JSON object") {
		t.Errorf("failures %q", f)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	rec = &testkit.Recorder{TB: t}
	if testkit.Run(func() { apitest.Client{TB: rec, Base: gone.URL}.Call("GET", "/healthz", "", nil) }) {
		t.Error("Call returned without an answer")
	}
	if rec.Fatals() != 1 {
		t.Errorf("a refused connection: failures %q, want one fatal", rec.Failures())
	}

	rec = &testkit.Recorder{TB: t}
	if testkit.Run(func() { apitest.Client{TB: rec, Base: gone.URL}.Call("GET", "/x", "", func() {}) }) || rec.Fatals() != 1 {
		t.Errorf("Call with a body it cannot encode: failures %q, want one fatal", rec.Failures())
	}
	rec = &testkit.Recorder{TB: t}
	if testkit.Run(func() { apitest.Client{TB: rec, Base: "http://[::1"}.Fetch("GET", "http://[::1") }) || rec.Fatals() != 1 {
		t.Errorf("Fetch of a malformed URL: failures %q", rec.Failures())
	}
}

func TestFetch(t *testing.T) {
	srv := newServer(t, 200, "plain bytes", "Content-Type", "text/plain")
	other := newServer(t, 200, "other bytes")
	rec := &testkit.Recorder{TB: t}
	c := apitest.Client{TB: rec, Base: srv.URL, HTTP: srv.Client()}
	var resp *http.Response
	var body []byte
	testkit.Run(func() { resp, body = c.Fetch("GET", other.URL+"/anything", "Range", "bytes=0-1") })
	if f := rec.Failures(); len(f) > 0 {
		t.Errorf("a URL outside Base was checked against the API document: %v", f)
	}
	req, _ := other.request()
	if resp.StatusCode != 200 || string(body) != "other bytes" || req.Header.Get("Range") != "bytes=0-1" || req.Header.Get("Authorization") != "" {
		t.Errorf("Fetch: %d %q, sent %v", resp.StatusCode, body, req.Header)
	}
	// Under Base it is held to the document: /healthz answers JSON.
	testkit.Run(func() { c.Fetch("GET", srv.URL+"/healthz") })
	if f := rec.Failures(); len(f) != 1 || !strings.Contains(f[0], "differs from the API document") {
		t.Errorf("failures %q, want the text/plain /healthz reported", f)
	}
}

func TestSend(t *testing.T) {
	created := newServer(t, 201, `{"id":"obx_1","status":"pending"}`)
	rec := &testkit.Recorder{TB: t}
	var got map[string]any
	testkit.Run(func() {
		got = apitest.Client{TB: rec, Base: created.URL, Part: true}.Send("sk_k", map[string]any{"from": "+1", "to": "+2", "text": "x"})
	})
	req, _ := created.request()
	if got["id"] != "obx_1" || req.Method != "POST" || req.URL.Path != "/v1/messages" || len(rec.Failures()) > 0 {
		t.Errorf("Send = %v, sent %s %s, failures %v", got, req.Method, req.URL.Path, rec.Failures())
	}
	refused := newServer(t, 400, `{"error":{}}`)
	if testkit.Run(func() { apitest.Client{TB: rec, Base: refused.URL, Part: true}.Send("sk_k", map[string]any{}) }) {
		t.Error("Send returned on a 400")
	}
	if f := rec.Failures(); rec.Fatals() != 1 || !strings.Contains(f[0], "POST /v1/messages") || !strings.Contains(f[0], "400") {
		t.Errorf("failures %q", f)
	}
}

func TestCheckErrorType(t *testing.T) {
	resp := func(status int, typ, code, msg string) apitest.Response {
		raw := fmt.Sprintf(`{"error":{"type":%q,"code":%q,"message":%q}}`, typ, code, msg)
		r := apitest.Response{Status: status, Raw: []byte(raw)}
		json.Unmarshal(r.Raw, &r.Body)
		return r
	}
	for _, tc := range []struct {
		r      apitest.Response
		report bool
	}{
		{resp(401, "authentication_error", "invalid_api_key", "bad key"), false},
		{resp(404, "not_found_error", "chat_not_found", "no chat"), false},
		{resp(429, "rate_limit_error", "rate_limit_exceeded", "slow down"), false},
		{resp(403, "invalid_request_error", "contact_has_not_messaged", "wait"), false},
		{resp(404, "invalid_request_error", "chat_not_found", "no chat"), true},
		{resp(400, "invalid_request_error", "invalid_json", ""), true},
		{resp(500, "api_error", "internal_error", "oops"), true},
	} {
		rec := &testkit.Recorder{TB: t}
		testkit.Run(func() { apitest.CheckErrorType(rec, "test", tc.r) })
		if got := len(rec.Failures()) > 0; got != tc.report {
			t.Errorf("%d %s: reported %v, want %v (%v)", tc.r.Status, tc.r.Raw, got, tc.report, rec.Failures())
		}
	}
}

func TestResponseAccessors(t *testing.T) {
	var r apitest.Response
	if err := json.Unmarshal([]byte(`{"data":[{"id":"a"},{"id":"b"},7]}`), &r.Body); err != nil {
		t.Fatal(err)
	}
	d := r.Data()
	if len(d) != 3 || d[0]["id"] != "a" || d[1]["id"] != "b" || d[2] != nil {
		t.Errorf("Data() = %v", d)
	}
	if r.ErrCode() != "" || r.ErrType() != "" || r.ErrParam() != "" {
		t.Error("a list has error fields")
	}
	if len((apitest.Response{}).Data()) != 0 {
		t.Error("an empty response has data")
	}
}

func TestWithFields(t *testing.T) {
	m := map[string]any{"a": 1, "b": 2}
	got := apitest.WithFields(m, "b", nil, "c", "x", "a", 3)
	if len(got) != 2 || got["a"] != 3 || got["c"] != "x" {
		t.Errorf("WithFields = %v", got)
	}
	if len(m) != 2 || m["a"] != 1 || m["b"] != 2 {
		t.Errorf("the original changed: %v", m)
	}
}

func TestValidatorDirect(t *testing.T) {
	v, err := apitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if v.Doc().Paths.Find("/v1/messages") == nil {
		t.Fatal("the document has no /v1/messages")
	}
	// Each LoadDocument is a fresh copy.
	a, err := apitest.LoadDocument()
	if err != nil {
		t.Fatal(err)
	}
	a.Info.Title = "changed"
	b, _ := apitest.LoadDocument()
	if b.Info.Title == "changed" || v.Doc().Info.Title == "changed" {
		t.Error("LoadDocument shares its document")
	}

	ctx := context.Background()
	hdr := http.Header{"X-Request-Id": {requestID}, "Cache-Control": {"no-store"}, "Content-Type": {"application/json"}}
	req := httptest.NewRequest("GET", "http://127.0.0.1:1/nowhere", nil)
	var routeErr *apitest.RouteError
	err = v.Validate(ctx, req, nil, 200, hdr, []byte(`{}`))
	if !errors.As(err, &routeErr) || routeErr.Path != "/nowhere" || !strings.Contains(err.Error(), "not in the document") || errors.Unwrap(routeErr) == nil {
		t.Errorf("an undocumented path: %v", err)
	}
	if err := v.ValidateRequest(ctx, req, nil); !errors.As(err, &routeErr) {
		t.Errorf("ValidateRequest of an undocumented path: %v", err)
	}
	if err := v.ValidateResponse(ctx, req, 200, hdr, nil); !errors.As(err, &routeErr) {
		t.Errorf("ValidateResponse of an undocumented path: %v", err)
	}

	health := httptest.NewRequest("GET", "http://127.0.0.1:1/healthz", nil)
	if err := v.ValidateResponse(ctx, health, 200, hdr, []byte(`{"status":"ok"}`)); err != nil {
		t.Errorf("a conforming /healthz answer: %v", err)
	}
	var respErr *apitest.ResponseError
	err = v.ValidateResponse(ctx, health, 200, hdr, []byte(`{"status":"ok","x":1}`))
	if !errors.As(err, &respErr) || !strings.HasPrefix(err.Error(), "apitest: response: ") || errors.Unwrap(respErr) == nil {
		t.Errorf("an extra field: %v", err)
	}

	post := httptest.NewRequest("POST", "http://127.0.0.1:1/v1/messages", strings.NewReader(`{`))
	post.Header.Set("Content-Type", "application/json")
	var reqErr *apitest.RequestError
	err = v.ValidateRequest(ctx, post, []byte(`{"text":5}`))
	if !errors.As(err, &reqErr) || !strings.HasPrefix(err.Error(), "apitest: request: ") || errors.Unwrap(reqErr) == nil {
		t.Errorf("a message whose text is a number: %v", err)
	}
	// Both sides wrong: both errors.
	err = v.Validate(ctx, post, []byte(`{"text":5}`), 201, hdr, []byte(`{}`))
	if !errors.As(err, &reqErr) || !errors.As(err, &respErr) {
		t.Errorf("both wrong: %v", err)
	}
}

func TestValidatorDo(t *testing.T) {
	v, err := apitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	good := newServer(t, 200, `{"status":"ok"}`)
	req, _ := http.NewRequest("GET", good.URL+"/healthz", nil)
	resp, body, err := v.Do(good.Client(), req, nil)
	if err != nil || resp.StatusCode != 200 || string(body) != `{"status":"ok"}` {
		t.Fatalf("Do = %v, %q, %v", resp, body, err)
	}
	// The body can still be read from the response.
	if again, _ := io.ReadAll(resp.Body); string(again) != `{"status":"ok"}` {
		t.Errorf("resp.Body holds %q", again)
	}

	bad := newServer(t, 200, `{"status":"down"}`)
	req, _ = http.NewRequest("GET", bad.URL+"/healthz", nil)
	var respErr *apitest.ResponseError
	if resp, _, err := v.Do(bad.Client(), req, nil); !errors.As(err, &respErr) || resp == nil {
		t.Errorf("Do of a wrong answer: %v, %v", resp, err)
	}

	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close()
	req, _ = http.NewRequest("GET", gone.URL+"/healthz", nil)
	if resp, _, err := v.Do(http.DefaultClient, req, nil); err == nil || resp != nil {
		t.Errorf("Do with no server: %v, %v", resp, err)
	}
}

func TestValidateEvent(t *testing.T) {
	v, err := apitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var reqErr *apitest.RequestError
	if err := v.ValidateEvent(ctx, http.Header{}, []byte("not json")); !errors.As(err, &reqErr) {
		t.Errorf("a body that is not JSON: %v", err)
	}
	var routeErr *apitest.RouteError
	if err := v.ValidateEvent(ctx, http.Header{}, []byte(`{"event":"no.such"}`)); !errors.As(err, &routeErr) || routeErr.Path != "webhooks.no.such" {
		t.Errorf("an unknown event: %v", err)
	}
	if err := v.ValidateEvent(ctx, http.Header{"Content-Type": {"application/json"}}, []byte(`{"event":"message.received","data":5}`)); !errors.As(err, &reqErr) {
		t.Errorf("a message.received without its fields and headers: %v", err)
	}
}
