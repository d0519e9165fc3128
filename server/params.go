package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/storage"
)

// body is a decoded JSON object. Fields are decoded one by one so that a
// wrong type names the parameter at fault; unknown fields are ignored.
type body map[string]json.RawMessage

func (s *Server) readBody(r *http.Request) (body, error) {
	data, err := s.readText(r, "invalid_json", "send a JSON object")
	if err != nil {
		return nil, err
	}
	var b body
	if err := json.Unmarshal(data, &b); err != nil || b == nil {
		return nil, httpapi.InvalidRequest("invalid_json", "", "The request body is not a valid JSON object.")
	}
	return b, nil
}

// readText reads a request body of UTF-8 text within the body limit. A
// body that is empty, unreadable or not UTF-8 is a 400 with code; expected
// says what the body should be.
func (s *Server) readText(r *http.Request, code, expected string) ([]byte, error) {
	limit := s.opts.MaxBodyBytes
	tooLarge := httpapi.TooLarge("request_too_large", "The request body is larger than %d bytes.", limit)
	if r.ContentLength > limit {
		dropOvershoot(r, 0, limit)
		return nil, tooLarge
	}
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			dropOvershoot(r, limit+1, limit) // the reader reads one byte past the limit
			return nil, tooLarge
		}
		return nil, httpapi.InvalidRequest(code, "", "The request body could not be read.")
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, httpapi.InvalidRequest(code, "", "The request body is empty; %s.", expected)
	}
	if !utf8.Valid(data) {
		return nil, httpapi.InvalidRequest(code, "", "The request body is not valid UTF-8.")
	}
	return data, nil
}

// str returns a string field; absent and null are "".
func (b body) str(name string) (string, error) {
	raw, ok := b[name]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", httpapi.Invalid(name, "%s must be a string.", name)
	}
	return s, nil
}

// optStr is str that tells absent or null (nil) from a string.
func (b body) optStr(name string) (*string, error) {
	raw, ok := b[name]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	s, err := b.str(name)
	return &s, err
}

func (b body) strings(name string) ([]string, error) {
	raw, ok := b[name]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var out []string
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, httpapi.Invalid(name, "%s must be an array of strings.", name)
	}
	return out, nil
}

func (b body) required(name string) (string, error) {
	s, err := b.str(name)
	if err == nil && strings.TrimSpace(s) == "" {
		return "", httpapi.Missing(name)
	}
	return s, err
}

// requiredID reads a required ID of a kind (prefix, such as "obx_"), what
// names the kind in the error ("an outbox item ID").
func (b body) requiredID(name, prefix, what string) (string, error) {
	id, err := b.required(name)
	if err == nil && !storage.IDShaped(id, prefix) {
		err = httpapi.Invalid(name, "%s must be %s (%s…).", name, what, prefix)
	}
	return id, err
}

// fromTo reads the two required fields every write has.
func (b body) fromTo() (from, to string, err error) {
	if from, err = b.required("from"); err != nil {
		return "", "", err
	}
	to, err = b.required("to")
	return from, to, err
}

// integer reads an optional integer field, what saying what it counts
// ("a number of seconds"); absent and null are nil. A string, a fraction
// or an exponent is refused, not rounded.
func (b body) integer(name, what string) (*int64, error) {
	raw, ok := b[name]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	v, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
	if err != nil {
		return nil, httpapi.Invalid(name, "%s must be an integer: %s, without a fraction or exponent.", name, what)
	}
	return &v, nil
}

func (b body) bool(name string) (bool, error) {
	raw, ok := b[name]
	if !ok || string(raw) == "null" {
		return false, nil
	}
	var v bool
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, httpapi.Invalid(name, "%s must be true or false.", name)
	}
	return v, nil
}

func queryRequired(r *http.Request, name string) (string, error) {
	v := strings.TrimSpace(r.URL.Query().Get(name))
	if v == "" {
		return "", httpapi.Missing(name)
	}
	return v, nil
}

// queryHandle is queryRequired for a handle. An unencoded "+" in a query
// string decodes as a space, so "?from=+15550001111" (what curl sends when
// typed by hand) arrives as " 15550001111": restore the plus.
func queryHandle(r *http.Request, name string) (string, error) {
	raw := r.URL.Query().Get(name)
	if len(raw) > 1 && raw[0] == ' ' && raw[1] >= '0' && raw[1] <= '9' {
		raw = "+" + raw[1:]
	}
	if strings.TrimSpace(raw) == "" {
		return "", httpapi.Missing(name)
	}
	return strings.TrimSpace(raw), nil
}

const (
	defaultLimit = 50
	maxLimit     = 100
)

func parseLimit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return defaultLimit, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxLimit {
		return 0, httpapi.Invalid("limit", "limit must be an integer from 1 to %d.", maxLimit)
	}
	return n, nil
}

// Cursors are opaque to clients: a kind letter and the storage position,
// base64url-encoded. The letter stops a chat cursor being used on messages.
func encodeCursor(kind byte, pos []byte) *string {
	if pos == nil {
		return nil
	}
	s := base64.RawURLEncoding.EncodeToString(append([]byte{kind}, pos...))
	return &s
}

// parseCursor reads a cursor of kind whose position is size bytes long,
// or of any length for a size of -1.
func parseCursor(r *http.Request, kind byte, size int) ([]byte, error) {
	v := r.URL.Query().Get("cursor")
	if v == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(v)
	if err != nil || size >= 0 && len(raw) != size+1 || len(raw) < 2 || raw[0] != kind {
		return nil, httpapi.Invalid("cursor", "cursor is not one this endpoint returned.")
	}
	return raw[1:], nil
}

// lineFor resolves a line handle (or ln_ ID) named by param and checks that
// the request's key may use it.
func (s *Server) lineFor(r *http.Request, value, param string) (storage.Line, error) {
	var l storage.Line
	var ok bool
	if strings.HasPrefix(value, "ln_") {
		l, ok = s.db.LineByID(value)
	} else {
		h, err := handle.Normalize(value)
		if err != nil {
			e := httpapi.BadHandle(param, value, err)
			e.Message += " A line is named by its handle or its ln_ ID."
			return l, e
		}
		l, ok = s.db.LineByHandle(h)
	}
	if !ok {
		return l, httpapi.NotFound("line_not_found", param, "No line %s on this server.", value)
	}
	return l, checkLineAccess(apiKey(r.Context()), l)
}

// target is what a `to` parameter names: a chat by ID, or a contact's handle
// (whose one-to-one chat may not exist yet).
type target struct {
	chat    storage.Chat
	found   bool
	contact string
}

func (s *Server) resolveTo(r *http.Request, line storage.Line, value string) (target, error) {
	if strings.HasPrefix(value, "cht_") {
		if !storage.IDShaped(value, "cht_") {
			return target{}, httpapi.Invalid("to", "to is not a valid chat ID.")
		}
		c, err := s.db.ChatByID(r.Context(), value)
		if err == nil && c.LineID != line.ID {
			err = storage.ErrNotFound
		}
		if err == nil {
			err = s.hideSandboxChat(r.Context(), line, c)
		}
		if errors.Is(err, storage.ErrNotFound) {
			return target{}, httpapi.NotFound("chat_not_found", "to", "No chat %s on line %s.", value, line.Handle)
		}
		return target{chat: c, found: true, contact: c.Identifier}, err
	}
	h, herr := handle.Normalize(value)
	if herr != nil {
		// Not a handle: perhaps a group's identifier ("chat…").
		c, err := s.db.ChatByIdentifier(r.Context(), line.ID, value)
		if err == nil {
			err = s.hideSandboxChat(r.Context(), line, c)
		}
		if errors.Is(err, storage.ErrNotFound) {
			e := httpapi.BadHandle("to", value, herr)
			e.Message += " A chat is named by its cht_ ID or, for a group, its identifier (chat…)."
			return target{}, e
		}
		return target{chat: c, found: err == nil, contact: c.Identifier}, err
	}
	c, err := s.db.ChatByIdentifier(r.Context(), line.ID, h)
	if err == nil {
		err = s.hideSandboxChat(r.Context(), line, c)
	}
	if errors.Is(err, storage.ErrNotFound) {
		if handle.IsShortCode(h) {
			return target{}, httpapi.BadHandle("to", value, handle.NotAShortCode(h, line.Handle))
		}
		return target{contact: h}, nil
	}
	return target{chat: c, found: err == nil, contact: h}, err
}

// checkContacts refuses, as resolveTo does, the short codes among handles
// (normalised, given as param) that have no chat with line.
func (s *Server) checkContacts(ctx context.Context, line storage.Line, param string, handles ...string) error {
	for _, h := range handles {
		if !handle.IsShortCode(h) {
			continue
		}
		c, err := s.db.ChatByIdentifier(ctx, line.ID, h)
		if err == nil {
			err = s.hideSandboxChat(ctx, line, c)
		}
		if errors.Is(err, storage.ErrNotFound) {
			return httpapi.BadHandle(param, h, handle.NotAShortCode(h, line.Handle))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// hideSandboxChat is storage.ErrNotFound for a chat of the sandbox line that
// is not the request key's owner's: to that key it does not exist.
func (s *Server) hideSandboxChat(ctx context.Context, line storage.Line, c storage.Chat) error {
	ok, err := s.sandboxChatVisible(ctx, line, c)
	if err == nil && !ok {
		err = storage.ErrNotFound
	}
	return err
}
