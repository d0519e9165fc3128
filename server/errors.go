package server

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"

	"github.com/blueline-app/blueline/handle"
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
// server answers with is made here.

// errInvalidRequest is a 400: the request cannot be done as it is; param
// names the parameter at fault, "" for none.
func errInvalidRequest(code, param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: code, Message: fmt.Sprintf(format, args...), Param: param}
}

func errMissing(param string) *Error {
	return errInvalidRequest("missing_required_parameter", param, "Missing required parameter: %s.", param)
}

func errInvalid(param, format string, args ...any) *Error {
	return errInvalidRequest("invalid_parameter_value", param, format, args...)
}

// errHandle answers a parameter that should hold a handle and does not:
// why (err, from handle.Normalize), and the forms a handle takes. The value
// is quoted, escapes and all: it may hold the very characters that made it
// wrong.
func errHandle(param, value string, err error) *Error {
	reason := err.Error()
	if he, ok := errors.AsType[*handle.Error](err); ok {
		reason = he.Reason
	}
	return errInvalid(param, "%s %q is not a handle: %s. A handle is %s.", param, value, reason, handle.Forms)
}

// errUnauthenticated is a 401: no valid API key.
func errUnauthenticated(code, message string) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: typeAuthentication, Code: code, Message: message}
}

// errForbidden is a 403: the API key may not do this.
func errForbidden(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusForbidden, Type: typeAuthorization, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errContactFirst is the 403 of the contact-first rule: contact (named by
// param) has not written to the line, which may only act (message, add to
// a group…) on contacts who did.
func errContactFirst(param, contact, lineHandle, act string) *Error {
	return &Error{Status: http.StatusForbidden, Type: typeInvalidRequest, Code: "contact_has_not_messaged", Param: param,
		Message: fmt.Sprintf("%s has not messaged line %s yet; a line may only %s contacts who wrote to it first.", contact, lineHandle, act)}
}

// errNotFound is a 404: what param names does not exist, or not for the
// API key.
func errNotFound(code, param, format string, args ...any) *Error {
	return &Error{Status: http.StatusNotFound, Type: typeNotFound, Code: code, Message: fmt.Sprintf(format, args...), Param: param}
}

// errTurnedOff is a 404 for a part of the daemon its configuration turns
// off: code and message say which, and how to turn it on.
func errTurnedOff(code, message string) *Error {
	return &Error{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: code, Message: message}
}

// errMethodNotAllowed is a 405: the path takes only the methods allowed.
func errMethodNotAllowed(method, path, allowed string) *Error {
	return &Error{Status: http.StatusMethodNotAllowed, Type: typeInvalidRequest, Code: "method_not_allowed",
		Message: fmt.Sprintf("%s is not allowed on %s; allowed: %s.", method, path, allowed)}
}

// errRequestTimeout is a 408: the request did not arrive in time.
func errRequestTimeout(message string) *Error {
	return &Error{Status: http.StatusRequestTimeout, Type: typeInvalidRequest, Code: "request_timeout", Message: message}
}

// errConflict is a 409: what param names is not in a state that allows
// the request.
func errConflict(code, param, format string, args ...any) *Error {
	return &Error{Status: http.StatusConflict, Type: typeInvalidRequest, Code: code, Message: fmt.Sprintf(format, args...), Param: param}
}

// errTooLarge is a 413: the request's body is over a limit.
func errTooLarge(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: typeInvalidRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errTooManyRequests is a 429: a limit is reached; retryAfter, when more
// than 0, is the Retry-After in seconds (see retrySeconds).
func errTooManyRequests(code string, retryAfter int, format string, args ...any) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: typeRateLimit, Code: code, Message: fmt.Sprintf(format, args...), RetryAfter: retryAfter}
}

// errUnavailable is a 503: something the request needs did not answer.
func errUnavailable(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: typeAPI, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errInternal is a 500 that reveals nothing: what writeError answers for
// any error that is not an API error.
var errInternal = &Error{Status: http.StatusInternalServerError, Type: typeAPI, Code: "internal_error",
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

// writeError answers with err in the spec's shape. Errors that are not API
// errors are logged and answered as a 500 that reveals nothing.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	var e *Error
	if !errors.As(err, &e) {
		log.Error("request failed", "method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()), "err", err)
		e = errInternal
	}
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
	switch e.Status {
	case http.StatusUnauthorized:
		// RFC 6750: how to authenticate, and whether the key sent was
		// the trouble.
		challenge := bearerChallenge
		if e.Code == errInvalidKey.Code {
			challenge += `, error="invalid_token"`
		}
		w.Header().Set("WWW-Authenticate", challenge)
	case http.StatusRequestEntityTooLarge:
		// The body may not have been read to its end (see dropOvershoot):
		// the connection cannot be trusted with another request.
		w.Header().Set("Connection", "close")
	}
	writeJSON(w, e.Status, errorBody{
		Error:     errorDetail{Type: e.Type, Code: e.Code, Message: e.Message, Param: e.Param},
		RequestID: requestID(r.Context()),
	})
}
