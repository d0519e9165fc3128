// Package httpapi is what Blueline's HTTP surfaces (the /v1 API and the
// admin socket) share: errors in the spec's shape (one type, a constructor
// per kind, and WriteError, the one place an error becomes a response),
// JSON answers, and request IDs.
package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/storage"
)

// Error is an API error in the spec's shape. Handlers return one; writeError
// is the one place that turns errors into HTTP responses.
type Error struct {
	Status  int
	Type    string
	Code    string
	Message string
	Param   string
	// RetryAfter, when set, is sent as the Retry-After header (seconds).
	RetryAfter int
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// bearerChallenge is the WWW-Authenticate of every 401.
const bearerChallenge = `Bearer realm="blueline"`

// Error types of the spec.
const (
	typeAuthentication = "authentication_error"
	typeAuthorization  = "authorization_error"
	typeInvalidRequest = "invalid_request_error"
	typeNotFound       = "not_found_error"
	typeRateLimit      = "rate_limit_error"
	typeAPI            = "api_error"
)

// The constructors of the API's errors, one per kind: every *Error the
// API and the admin socket answer with is made here.

// InvalidRequest is a 400: the request cannot be done as it is; param
// names the parameter at fault, "" for none.
func InvalidRequest(code, param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: code, Message: fmt.Sprintf(format, args...), Param: param}
}

func Missing(param string) *Error {
	return InvalidRequest("missing_required_parameter", param, "Missing required parameter: %s.", param)
}

func Invalid(param, format string, args ...any) *Error {
	return InvalidRequest("invalid_parameter_value", param, format, args...)
}

// BadHandle answers a parameter that should hold a handle and does not:
// why (err, from handle.Normalize), and the forms a handle takes. The value
// is quoted, escapes and all: it may hold the very characters that made it
// wrong.
func BadHandle(param, value string, err error) *Error {
	reason := err.Error()
	if he, ok := errors.AsType[*handle.Error](err); ok {
		reason = he.Reason
	}
	return Invalid(param, "%s %q is not a handle: %s. A handle is %s.", param, value, reason, handle.Forms)
}

// Unauthenticated is a 401: no valid API key.
func Unauthenticated(code, message string) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: typeAuthentication, Code: code, Message: message}
}

// Forbidden is a 403: the API key may not do this.
func Forbidden(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Type: typeAuthorization, Code: code, Message: fmt.Sprintf(format, args...)}
}

// ContactFirst is the 403 of the contact-first rule: contact (named by
// param) has not written to the line, which may only act (message, add to
// a group…) on contacts who did.
func ContactFirst(param, contact, lineHandle, act string) *Error {
	return &Error{Status: http.StatusForbidden, Type: typeInvalidRequest, Code: "contact_has_not_messaged", Param: param,
		Message: fmt.Sprintf("%s has not messaged line %s yet; a line may only %s contacts who wrote to it first.", contact, lineHandle, act)}
}

// NotFound is a 404: what param names does not exist, or not for the
// API key.
func NotFound(code, param, format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: typeNotFound, Code: code, Message: fmt.Sprintf(format, args...), Param: param}
}

// TurnedOff is a 404 for a part of the daemon its configuration turns
// off: code and message say which, and how to turn it on.
func TurnedOff(code, message string) *Error {
	return &Error{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: code, Message: message}
}

// MethodNotAllowed is a 405: the path takes only the methods allowed.
func MethodNotAllowed(method, path, allowed string) *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Type: typeInvalidRequest, Code: "method_not_allowed",
		Message: fmt.Sprintf("%s is not allowed on %s; allowed: %s.", method, path, allowed)}
}

// RequestTimeout is a 408: the request did not arrive in time.
func RequestTimeout(message string) *Error {
	return &Error{Status: http.StatusRequestTimeout, Type: typeInvalidRequest, Code: "request_timeout", Message: message}
}

// Conflict is a 409: what param names is not in a state that allows
// the request.
func Conflict(code, param, format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Type: typeInvalidRequest, Code: code, Message: fmt.Sprintf(format, args...), Param: param}
}

// TooLarge is a 413: the request's body is over a limit.
func TooLarge(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// TooManyRequests is a 429: a limit is reached; retryAfter, when more
// than 0, is the Retry-After in seconds (see RetrySeconds).
func TooManyRequests(code string, retryAfter int, format string, args ...any) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: code, Message: fmt.Sprintf(format, args...), RetryAfter: retryAfter}
}

// Unavailable is a 503: something the request needs did not answer.
func Unavailable(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: typeAPI, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Internal is a 500 that reveals nothing: what WriteError answers for
// any error that is not an API error.
var Internal = &Error{Status: http.StatusInternalServerError, Type: typeAPI, Code: "internal_error",
	Message: "Something went wrong on our side; the request may be retried."}

type errorBody struct {
	Error     errorDetail `json:"error"`
	RequestID string      `json:"request_id"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param,omitempty"`
}

// WriteError answers with err in the spec's shape: the one place an error
// becomes an HTTP response. Errors that are not API errors are logged and
// answered as a 500 that reveals nothing.
func WriteError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var e *Error
	if !errors.As(err, &e) {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "request_id", RequestID(r.Context()), "err", err)
		e = Internal
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	switch e.Status {
	case http.StatusUnauthorized:
		// RFC 6750: how to authenticate, and whether the key sent was
		// the trouble.
		challenge := bearerChallenge
		if e.Code == InvalidKeyCode {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
	case http.StatusRequestEntityTooLarge:
		// The body may not have been read to its end (see dropOvershoot):
		// the connection cannot be trusted with another request.
		w.Header().Set("Connection", "close")
	}
	WriteJSON(w, e.Status, errorBody{
		Error:     errorDetail{Type: e.Type, Code: e.Code, Message: e.Message, Param: e.Param},
		RequestID: RequestID(r.Context()),
	})
}

// InvalidKeyCode is the code of the 401 for a key that is not valid: its
// challenge says the token was the trouble (RFC 6750).
const InvalidKeyCode = "invalid_api_key"

// RetrySeconds is a Retry-After for a wait of d: whole seconds, at least 1.
func RetrySeconds(d time.Duration) int { return max(1, int(math.Ceil(d.Seconds()))) }

type requestIDKey struct{}

// NewRequestID is a fresh request ID (req_…), which the answer's
// X-Request-Id header and error body carry.
func NewRequestID() string { return storage.NewID("req_") }

// WithRequestID is ctx carrying the request's ID, which answers and logs
// name.
func WithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

// RequestID is the ID of the request ctx belongs to; "" outside one.
func RequestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// WriteJSON answers with v as JSON, not HTML-escaped: download URLs read
// "&", not "\u0026".
func WriteJSON(w http.ResponseWriter, status int, v any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Our own response types always marshal; this is a programming error.
		panic(err)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// List is a page of data in the spec's list shape; next is the cursor of
// the page after it, nil on the last.
func List[T any](ctx context.Context, data []T, next *string) api.List[T] {
	if data == nil {
		data = []T{}
	}
	return api.List[T]{Data: data, HasMore: next != nil, NextCursor: next, RequestID: RequestID(ctx)}
}
