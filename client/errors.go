package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Kinds of API errors, for errors.Is: an *Error matches the one of its
// HTTP status (any 4xx that has no kind of its own is ErrInvalidRequest),
// as the reference SDK maps statuses to its error classes.
var (
	ErrInvalidRequest = errors.New("blueline: invalid request")       // 400 and other 4xx
	ErrAuthentication = errors.New("blueline: authentication failed") // 401
	ErrPermission     = errors.New("blueline: permission denied")     // 403
	ErrNotFound       = errors.New("blueline: not found")             // 404
	ErrRateLimit      = errors.New("blueline: rate limited")          // 429
)

// Error is an answer of the API other than a 2xx, in the spec's error shape
// {error: {type, code, message, param?}, request_id}. An answer that is not
// in that shape (a proxy's page, say) is an Error too, with Status and a
// Message taken from its body.
type Error struct {
	Status  int    // HTTP status
	Type    string // authentication_error, not_found_error, …
	Code    string // invalid_api_key, message_not_found, …
	Message string
	// Param names the parameter at fault, when one is (a header such as
	// Idempotency-Key included).
	Param     string
	RequestID string
	// RetryAfter is the wait the Retry-After header asks for (429s).
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "blueline: %d", e.Status)
	if e.Code != "" {
		b.WriteString(" " + e.Code)
	}
	if e.Message != "" {
		b.WriteString(": " + e.Message)
	}
	if e.Param != "" {
		b.WriteString(" (param " + e.Param + ")")
	}
	if e.RequestID != "" {
		b.WriteString(" [" + e.RequestID + "]")
	}
	return b.String()
}

// Is reports whether target is the kind of e's status.
func (e *Error) Is(target error) bool {
	switch target {
	case ErrAuthentication:
		return e.Status == http.StatusUnauthorized
	case ErrPermission:
		return e.Status == http.StatusForbidden
	case ErrNotFound:
		return e.Status == http.StatusNotFound
	case ErrRateLimit:
		return e.Status == http.StatusTooManyRequests
	case ErrInvalidRequest:
		switch e.Status {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusTooManyRequests:
			return false
		}
		return e.Status >= 400 && e.Status < 500
	}
	return false
}

// maxErrorBody is how much of an error answer is read.
const maxErrorBody = 64 << 10

// ResponseError reads resp, an answer other than a 2xx, as an *Error: the
// API's error shape, or what the body says when it is not in it.
func ResponseError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode, RequestID: resp.Header.Get("X-Request-Id"),
		RetryAfter: retryAfter(resp.Header.Get("Retry-After"), time.Now())}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var body struct {
		Error *struct {
			Type    string `json:"type"`
			Code    string `json:"code"`
			Message string `json:"message"`
			Param   string `json:"param"`
		} `json:"error"`
		RequestID string `json:"request_id"`
	}
	if json.Unmarshal(data, &body) == nil && body.Error != nil {
		e.Type, e.Code, e.Message, e.Param = body.Error.Type, body.Error.Code, body.Error.Message, body.Error.Param
		if body.RequestID != "" {
			e.RequestID = body.RequestID
		}
		return e
	}
	// Not our shape: keep what the body says, briefly.
	e.Message = http.StatusText(resp.StatusCode)
	if text := strings.TrimSpace(string(data)); text != "" && utf8.ValidString(text) {
		if len(text) > 200 {
			text = strings.ToValidUTF8(text[:200], "") + "…"
		}
		e.Message = text
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		e.Message = fmt.Sprintf("unexpected redirect to %q", resp.Header.Get("Location"))
	}
	return e
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		if n < 0 {
			return 0
		}
		return time.Duration(n) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}
