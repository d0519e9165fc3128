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

func errMissing(param string) *Error {
	return &Error{Status: 400, Type: typeInvalidRequest, Code: "missing_required_parameter",
		Message: fmt.Sprintf("Missing required parameter: %s.", param), Param: param}
}

func errInvalid(param, format string, args ...any) *Error {
	return &Error{Status: 400, Type: typeInvalidRequest, Code: "invalid_parameter_value",
		Message: fmt.Sprintf(format, args...), Param: param}
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

func errInvalidRequest(code, format string, args ...any) *Error {
	return &Error{Status: 400, Type: typeInvalidRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

func errForbidden(code, format string, args ...any) *Error {
	return &Error{Status: 403, Type: typeAuthorization, Code: code, Message: fmt.Sprintf(format, args...)}
}

func errNotFound(code, param, format string, args ...any) *Error {
	return &Error{Status: 404, Type: typeNotFound, Code: code, Message: fmt.Sprintf(format, args...), Param: param}
}

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
		e = &Error{Status: 500, Type: typeAPI, Code: "internal_error", Message: "Something went wrong on our side; the request may be retried."}
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
