package apitest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/blueline-app/blueline/apidoc"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
)

// LoadDocument parses and validates the API document (package apidoc). Each call returns a fresh
// *openapi3.T that the caller may change.
func LoadDocument() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(apidoc.JSON())
	if err != nil {
		return nil, fmt.Errorf("apitest: load: %w", err)
	}
	if err := doc.Validate(loader.Context); err != nil {
		return nil, fmt.Errorf("apitest: invalid document: %w", err)
	}
	return doc, nil
}

// Validator checks requests and responses against the document. It is safe
// for concurrent use.
type Validator struct {
	doc    *openapi3.T
	router routers.Router
	opts   *openapi3filter.Options
}

// NewValidator loads the document and returns a validator over it.
func NewValidator() (*Validator, error) {
	doc, err := LoadDocument()
	if err != nil {
		return nil, err
	}
	// Match any host: the daemon's address is the test's, not the
	// document's.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("apitest: router: %w", err)
	}
	return &Validator{doc: doc, router: router, opts: &openapi3filter.Options{
		// A status the operation does not document is drift too.
		IncludeResponseStatus: true,
		// Never rewrite the caller's request with defaults.
		SkipSettingDefaults: true,
		MultiError:          true,
		// The server does the authentication; the document only says
		// which operations need a key. A request without one is still
		// checked for the rest.
		AuthenticationFunc: func(context.Context, *openapi3filter.AuthenticationInput) error { return nil },
	}}, nil
}

// Doc returns the validator's document. Do not change it.
func (v *Validator) Doc() *openapi3.T { return v.doc }

// RouteError is returned when no documented operation matches a request.
type RouteError struct {
	Method, Path string
	Err          error
}

func (e *RouteError) Error() string {
	return fmt.Sprintf("apitest: %s %s is not in the document: %v", e.Method, e.Path, e.Err)
}

func (e *RouteError) Unwrap() error { return e.Err }

// RequestError is returned when a request does not match its operation. A
// test that sends an invalid request on purpose (to see the server's 400)
// can tell it apart with errors.As and check the response alone with
// ValidateResponse.
type RequestError struct{ Err error }

func (e *RequestError) Error() string { return "apitest: request: " + e.Err.Error() }
func (e *RequestError) Unwrap() error { return e.Err }

// ResponseError is returned when a response does not match its operation.
type ResponseError struct{ Err error }

func (e *ResponseError) Error() string { return "apitest: response: " + e.Err.Error() }
func (e *ResponseError) Unwrap() error { return e.Err }

// Validate checks one exchange: the request (with its body, which may be
// nil) and the response it got. The request's Body is not read; pass the
// bytes sent. It returns a *RouteError, a *RequestError or a
// *ResponseError; both of the last two when both fail (errors.Join).
func (v *Validator) Validate(ctx context.Context, req *http.Request, reqBody []byte, status int, header http.Header, body []byte) error {
	in, err := v.input(req, reqBody)
	if err != nil {
		return err
	}
	var reqErr error
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		reqErr = &RequestError{Err: err}
	}
	return errors.Join(reqErr, v.response(ctx, in, status, header, body))
}

// ValidateResponse checks only the response to req, for requests that are
// meant to be invalid.
func (v *Validator) ValidateResponse(ctx context.Context, req *http.Request, status int, header http.Header, body []byte) error {
	in, err := v.input(req, nil)
	if err != nil {
		return err
	}
	return v.response(ctx, in, status, header, body)
}

// ValidateRequest checks only a request and its body (which may be nil).
func (v *Validator) ValidateRequest(ctx context.Context, req *http.Request, reqBody []byte) error {
	in, err := v.input(req, reqBody)
	if err != nil {
		return err
	}
	if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
		return &RequestError{Err: err}
	}
	return nil
}

// input finds req's operation and makes a copy of req, with reqBody as its
// body, for the filter to read.
func (v *Validator) input(req *http.Request, reqBody []byte) (*openapi3filter.RequestValidationInput, error) {
	route, params, err := v.router.FindRoute(req)
	if err != nil {
		return nil, &RouteError{Method: req.Method, Path: req.URL.Path, Err: err}
	}
	r := req.Clone(req.Context())
	r.Body, r.GetBody, r.ContentLength = http.NoBody, nil, int64(len(reqBody))
	if len(reqBody) > 0 {
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	return &openapi3filter.RequestValidationInput{Request: r, PathParams: params, Route: route, Options: v.opts}, nil
}

func (v *Validator) response(ctx context.Context, in *openapi3filter.RequestValidationInput, status int, header http.Header, body []byte) error {
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: status, Header: header, Options: v.opts}
	out.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(ctx, out); err != nil {
		return &ResponseError{Err: err}
	}
	if err := checkErrorCode(in.Route.Operation, status, body); err != nil {
		return &ResponseError{Err: err}
	}
	return nil
}

// checkErrorCode holds an error answer to the codes its response lists in
// x-blueline-errors (code: type). The document has one error schema, so
// that client generators make one error type; which codes each status may
// carry, and their type, is in that extension.
func checkErrorCode(op *openapi3.Operation, status int, body []byte) error {
	ref := op.Responses.Status(status)
	if ref == nil || ref.Value == nil {
		return nil
	}
	allowed, ok := ref.Value.Extensions["x-blueline-errors"].(map[string]any)
	if !ok {
		return nil
	}
	var e struct {
		Error struct{ Type, Code string }
	}
	if err := json.Unmarshal(body, &e); err != nil {
		return fmt.Errorf("error body: %w", err)
	}
	switch want, ok := allowed[e.Error.Code]; {
	case !ok:
		return fmt.Errorf("status %d: error code %q is not one of its x-blueline-errors", status, e.Error.Code)
	case want != e.Error.Type:
		return fmt.Errorf("status %d: error code %q has type %q, not %v", status, e.Error.Code, e.Error.Type, want)
	}
	return nil
}

// Do sends req with client, validates the exchange and returns the response
// with its body read into the returned bytes (resp.Body is replaced with a
// reader over them). reqBody must be the body req carries (nil for none).
// The error is the transport's or the validator's; the response is
// returned in either case when there is one.
func (v *Validator) Do(client *http.Client, req *http.Request, reqBody []byte) (*http.Response, []byte, error) {
	resp, err := client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if err != nil {
		return resp, body, err
	}
	return resp, body, v.Validate(req.Context(), req, reqBody, resp.StatusCode, resp.Header, body)
}

// ValidateEvent checks a webhook delivery as its receiver got it: the
// headers and body against the document's webhooks entry for the body's
// event.
func (v *Validator) ValidateEvent(ctx context.Context, header http.Header, body []byte) error {
	var env struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return &RequestError{Err: fmt.Errorf("delivery body: %w", err)}
	}
	item := v.doc.Webhooks[env.Event]
	if item == nil || item.Post == nil {
		return &RouteError{Method: http.MethodPost, Path: "webhooks." + env.Event, Err: errors.New("no such event")}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://receiver/", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header = header.Clone()
	route := &routers.Route{Spec: v.doc, Path: env.Event, PathItem: item, Method: http.MethodPost, Operation: item.Post}
	if err := openapi3filter.ValidateRequest(ctx, &openapi3filter.RequestValidationInput{Request: req, Route: route, Options: v.opts}); err != nil {
		return &RequestError{Err: err}
	}
	return nil
}
