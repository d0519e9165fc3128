package httpapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// body is an error answer in the spec's shape.
type body struct {
	Error struct {
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Message string  `json:"message"`
		Param   *string `json:"param"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// write answers err through WriteError to a request carrying request ID
// id, and returns the recorded answer, its decoded body and what was
// logged.
func write(t *testing.T, id string, err error) (*httptest.ResponseRecorder, body, string) {
	t.Helper()
	var logs testkit.LogBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	r := httptest.NewRequest(http.MethodPost, "/v1/messages", nil)
	if id != "" {
		r = r.WithContext(httpapi.WithRequestID(r.Context(), id))
	}
	w := httptest.NewRecorder()
	httpapi.WriteError(w, r, log, err)
	var b body
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("body %q is not JSON: %v", w.Body.String(), err)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
	return w, b, logs.String()
}

func TestWriteErrorShape(t *testing.T) {
	w, b, logs := write(t, "req_1", httpapi.Invalid("to", "Bad %s.", "to"))
	if w.Code != http.StatusBadRequest {
		t.Errorf("status = %d, want 400", w.Code)
	}
	if b.Error.Type != "invalid_request_error" || b.Error.Code != "invalid_parameter_value" || b.Error.Message != "Bad to." {
		t.Errorf("error = %+v", b.Error)
	}
	if b.Error.Param == nil || *b.Error.Param != "to" {
		t.Errorf("param = %v, want to", b.Error.Param)
	}
	if b.RequestID != "req_1" {
		t.Errorf("request_id = %q, want req_1", b.RequestID)
	}
	if logs != "" {
		t.Errorf("an API error was logged: %s", logs)
	}
	for _, h := range []string{"Retry-After", "WWW-Authenticate", "Connection"} {
		if v := w.Header().Get(h); v != "" {
			t.Errorf("%s = %q on a 400", h, v)
		}
	}
}

// An error without a parameter has no param field at all.
func TestWriteErrorNoParam(t *testing.T) {
	w, _, _ := write(t, "", httpapi.Conflict("busy", "", "Busy."))
	var raw struct {
		Error map[string]any `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	if _, ok := raw.Error["param"]; ok {
		t.Errorf("param present in %s", w.Body.String())
	}
	if w.Code != http.StatusConflict {
		t.Errorf("status = %d", w.Code)
	}
}

// An API error wrapped in another is still answered as itself.
func TestWriteErrorWrapped(t *testing.T) {
	err := fmt.Errorf("while sending: %w", httpapi.NotFound("chat_not_found", "chat_id", "No chat %s.", "cht_1"))
	w, b, logs := write(t, "req_2", err)
	if w.Code != http.StatusNotFound || b.Error.Code != "chat_not_found" || b.Error.Type != "not_found_error" {
		t.Errorf("answer = %d %+v", w.Code, b.Error)
	}
	if logs != "" {
		t.Errorf("logged: %s", logs)
	}
}

// Any other error is a 500 that reveals nothing, and is logged with the
// request's ID.
func TestWriteErrorInternal(t *testing.T) {
	w, b, logs := write(t, "req_secret", errors.New("bolt: database file /var/db/secret is corrupt"))
	if w.Code != http.StatusInternalServerError {
		t.Errorf("status = %d, want 500", w.Code)
	}
	if b.Error.Type != "api_error" || b.Error.Code != "internal_error" || b.Error.Param != nil {
		t.Errorf("error = %+v", b.Error)
	}
	if strings.Contains(w.Body.String(), "secret is corrupt") || strings.Contains(w.Body.String(), "bolt") {
		t.Errorf("the answer reveals the error: %s", w.Body.String())
	}
	if b.RequestID != "req_secret" {
		t.Errorf("request_id = %q", b.RequestID)
	}
	for _, want := range []string{"request failed", "secret is corrupt", "req_secret", "/v1/messages", "POST"} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q: %s", want, logs)
		}
	}
	if b.Error.Message != httpapi.Internal.Message {
		t.Errorf("message = %q", b.Error.Message)
	}
}

func TestWriteErrorRetryAfter(t *testing.T) {
	w, b, _ := write(t, "", httpapi.TooManyRequests("rate_limit_exceeded", 17, "Slow down for %ds.", 17))
	if w.Code != http.StatusTooManyRequests || b.Error.Type != "rate_limit_error" || b.Error.Message != "Slow down for 17s." {
		t.Errorf("answer = %d %+v", w.Code, b.Error)
	}
	if got := w.Header().Get("Retry-After"); got != "17" {
		t.Errorf("Retry-After = %q, want 17", got)
	}
	// No wait given: no header.
	w, _, _ = write(t, "", httpapi.TooManyRequests("quota", 0, "Over quota."))
	if got := w.Header().Get("Retry-After"); got != "" {
		t.Errorf("Retry-After = %q without a wait", got)
	}
}

func TestWriteErrorUnauthorized(t *testing.T) {
	w, b, _ := write(t, "", httpapi.Unauthenticated("missing_api_key", "No key."))
	if w.Code != http.StatusUnauthorized || b.Error.Type != "authentication_error" || b.Error.Code != "missing_api_key" {
		t.Errorf("answer = %d %+v", w.Code, b.Error)
	}
	if got := w.Header().Get("WWW-Authenticate"); got != `Bearer realm="blueline"` {
		t.Errorf("WWW-Authenticate = %q", got)
	}
	w, _, _ = write(t, "", httpapi.Unauthenticated(httpapi.InvalidKeyCode, "Bad key."))
	if got := w.Header().Get("WWW-Authenticate"); got != `Bearer realm="blueline", error="invalid_token"` {
		t.Errorf("WWW-Authenticate for an invalid key = %q", got)
	}
}

func TestWriteErrorTooLarge(t *testing.T) {
	w, b, _ := write(t, "", httpapi.TooLarge("body_too_large", "Over %d bytes.", 10))
	if w.Code != http.StatusRequestEntityTooLarge || b.Error.Type != "invalid_request_error" || b.Error.Message != "Over 10 bytes." {
		t.Errorf("answer = %d %+v", w.Code, b.Error)
	}
	if got := w.Header().Get("Connection"); got != "close" {
		t.Errorf("Connection = %q, want close", got)
	}
}

// Each constructor's status, type, code and param.
func TestConstructors(t *testing.T) {
	badHandle := httpapi.BadHandle("to", "nope", errors.New("plain reason"))
	cases := []struct {
		name             string
		err              *httpapi.Error
		status           int
		typ, code, param string
		messageHas       string
		retryAfter       int
	}{
		{"InvalidRequest", httpapi.InvalidRequest("invalid_json", "", "Not JSON: %v", "eof"), 400, "invalid_request_error", "invalid_json", "", "Not JSON: eof", 0},
		{"Missing", httpapi.Missing("text"), 400, "invalid_request_error", "missing_required_parameter", "text", "Missing required parameter: text.", 0},
		{"Invalid", httpapi.Invalid("limit", "Limit %d.", 5), 400, "invalid_request_error", "invalid_parameter_value", "limit", "Limit 5.", 0},
		{"BadHandle", badHandle, 400, "invalid_request_error", "invalid_parameter_value", "to", `to "nope" is not a handle: plain reason.`, 0},
		{"Unauthenticated", httpapi.Unauthenticated("missing_api_key", "No key."), 401, "authentication_error", "missing_api_key", "", "No key.", 0},
		{"Forbidden", httpapi.Forbidden("insufficient_scope", "Needs %s.", "messages:write"), 403, "authorization_error", "insufficient_scope", "", "Needs messages:write.", 0},
		{"ContactFirst", httpapi.ContactFirst("to", "+15551110001", "+15550000001", "message"), 403, "invalid_request_error", "contact_has_not_messaged", "to",
			"+15551110001 has not messaged line +15550000001 yet; a line may only message contacts who wrote to it first.", 0},
		{"NotFound", httpapi.NotFound("line_not_found", "line", "No line %s.", "x"), 404, "not_found_error", "line_not_found", "line", "No line x.", 0},
		{"TurnedOff", httpapi.TurnedOff("dashboard_disabled", "Off."), 404, "invalid_request_error", "dashboard_disabled", "", "Off.", 0},
		{"MethodNotAllowed", httpapi.MethodNotAllowed("PUT", "/v1/lines", "GET"), 405, "invalid_request_error", "method_not_allowed", "",
			"PUT is not allowed on /v1/lines; allowed: GET.", 0},
		{"RequestTimeout", httpapi.RequestTimeout("Too slow."), 408, "invalid_request_error", "request_timeout", "", "Too slow.", 0},
		{"Conflict", httpapi.Conflict("already_done", "id", "Done %s.", "x"), 409, "invalid_request_error", "already_done", "id", "Done x.", 0},
		{"TooLarge", httpapi.TooLarge("file_too_large", "Big."), 413, "invalid_request_error", "file_too_large", "", "Big.", 0},
		{"TooManyRequests", httpapi.TooManyRequests("rate_limit_exceeded", 3, "Wait."), 429, "rate_limit_error", "rate_limit_exceeded", "", "Wait.", 3},
		{"Unavailable", httpapi.Unavailable("bridge_unavailable", "Down %d.", 1), 503, "api_error", "bridge_unavailable", "", "Down 1.", 0},
		{"Internal", httpapi.Internal, 500, "api_error", "internal_error", "", "Something went wrong", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := c.err
			if e.Status != c.status || e.Type != c.typ || e.Code != c.code || e.Param != c.param || e.RetryAfter != c.retryAfter {
				t.Errorf("got %+v, want status %d type %s code %s param %q retry %d", e, c.status, c.typ, c.code, c.param, c.retryAfter)
			}
			if !strings.Contains(e.Message, c.messageHas) {
				t.Errorf("message %q lacks %q", e.Message, c.messageHas)
			}
			if got := e.Error(); got != c.code+": "+e.Message {
				t.Errorf("Error() = %q", got)
			}
		})
	}
}

// BadHandle gives handle.Normalize's reason, not its whole error, and
// quotes the value with its escapes.
func TestBadHandleReason(t *testing.T) {
	value := "+1 555\n"
	_, err := handle.Normalize(value)
	if err == nil {
		t.Fatalf("handle.Normalize(%q) accepted it", value)
	}
	he, ok := errors.AsType[*handle.Error](err)
	if !ok {
		t.Fatalf("handle.Normalize error %T is not a *handle.Error", err)
	}
	e := httpapi.BadHandle("from", value, err)
	if !strings.Contains(e.Message, he.Reason) {
		t.Errorf("message %q lacks the reason %q", e.Message, he.Reason)
	}
	if !strings.Contains(e.Message, `"+1 555\n"`) {
		t.Errorf("message %q does not quote the value with escapes", e.Message)
	}
	if !strings.HasSuffix(e.Message, "A handle is "+handle.Forms+".") {
		t.Errorf("message %q does not end with the forms of a handle", e.Message)
	}
}

func TestWriteJSONNoHTMLEscape(t *testing.T) {
	w := httptest.NewRecorder()
	httpapi.WriteJSON(w, http.StatusCreated, map[string]string{"url": "http://x/f?a=1&b=<2>"})
	if w.Code != http.StatusCreated {
		t.Errorf("status = %d", w.Code)
	}
	if got, want := w.Body.String(), `{"url":"http://x/f?a=1&b=<2>"}`+"\n"; got != want {
		t.Errorf("body = %q, want %q", got, want)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json; charset=utf-8" {
		t.Errorf("Content-Type = %q", ct)
	}
}

// WriteJSON panics on what cannot be marshalled: a programming error.
func TestWriteJSONPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("WriteJSON of a channel did not panic")
		}
	}()
	httpapi.WriteJSON(httptest.NewRecorder(), http.StatusOK, make(chan int))
}

func TestRequestID(t *testing.T) {
	ctx := context.Background()
	if got := httpapi.RequestID(ctx); got != "" {
		t.Errorf("RequestID outside a request = %q", got)
	}
	ctx = httpapi.WithRequestID(ctx, "req_a")
	if got := httpapi.RequestID(ctx); got != "req_a" {
		t.Errorf("RequestID = %q, want req_a", got)
	}
	inner := httpapi.WithRequestID(ctx, "req_b")
	if httpapi.RequestID(inner) != "req_b" || httpapi.RequestID(ctx) != "req_a" {
		t.Errorf("nested IDs: %q, %q", httpapi.RequestID(inner), httpapi.RequestID(ctx))
	}
}

func TestList(t *testing.T) {
	ctx := httpapi.WithRequestID(context.Background(), "req_l")
	l := httpapi.List[string](ctx, nil, nil)
	if l.Data == nil || len(l.Data) != 0 || l.HasMore || l.NextCursor != nil || l.RequestID != "req_l" {
		t.Errorf("empty list = %+v", l)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `{"data":[],"has_more":false,"next_cursor":null,"request_id":"req_l"}`; got != want {
		t.Errorf("JSON = %s, want %s", got, want)
	}
	next := "cur_2"
	l2 := httpapi.List(context.Background(), []int{1, 2}, &next)
	if !l2.HasMore || l2.NextCursor == nil || *l2.NextCursor != "cur_2" || len(l2.Data) != 2 || l2.RequestID != "" {
		t.Errorf("page = %+v", l2)
	}
}

func TestRetrySeconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{
		{0, 1},
		{-time.Second, 1},
		{time.Millisecond, 1},
		{time.Second, 1},
		{time.Second + time.Millisecond, 2},
		{1500 * time.Millisecond, 2},
		{59 * time.Second, 59},
		{time.Hour, 3600},
	} {
		if got := httpapi.RetrySeconds(c.d); got != c.want {
			t.Errorf("RetrySeconds(%s) = %d, want %d", c.d, got, c.want)
		}
	}
}

func TestNewRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := httpapi.NewRequestID()
		if !storage.ValidID(id, "req_") {
			t.Fatalf("NewRequestID() = %q, not a req_ ID", id)
		}
		if seen[id] {
			t.Fatalf("NewRequestID() repeated %q", id)
		}
		seen[id] = true
	}
}
