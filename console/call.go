package console

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/blueline-app/blueline/client/api"
)

// apiError is an error answer of the API or the admin socket, in the
// spec's shape.
type apiError struct {
	Status  int    `json:"-"`
	Type    string `json:"type"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Param   string `json:"param"`
}

func (e *apiError) Error() string { return e.Message }

// call makes an in-process request to the API (admin false) or the admin
// socket's handler, as the session in r's context, and decodes the answer
// into out. An error answer comes back as *apiError.
func (c *Console) call(r *http.Request, admin bool, method, path string, body, out any) error {
	h := c.opts.API
	if admin {
		h = c.opts.Admin
	}
	return c.serve(r, h, "", method, path, body, out)
}

// callAsOwner is the operator's call to the API acting as owner, through
// the admin socket's handler (api.OwnerHeader): how the operator acts on
// what the API keeps to an owner, such as the owner's sandbox webhooks.
func (c *Console) callAsOwner(r *http.Request, owner, method, path string, body, out any) error {
	if currentSession(r.Context()).Owner != "" {
		return &apiError{Status: http.StatusForbidden, Message: "Only the host's operator may act as another owner."}
	}
	return c.serve(r, c.opts.Admin, owner, method, path, body, out)
}

func (c *Console) serve(r *http.Request, h http.Handler, owner, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(r.Context(), method, path, rd)
	if err != nil {
		return err
	}
	req.RemoteAddr = r.RemoteAddr
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if owner != "" {
		req.Header.Set(api.OwnerHeader, owner)
	}
	rec := &recorder{header: http.Header{}, status: http.StatusOK}
	h.ServeHTTP(rec, req)
	if rec.status >= 400 {
		var e struct {
			Error apiError `json:"error"`
		}
		if err := json.Unmarshal(rec.body.Bytes(), &e); err != nil || e.Error.Message == "" {
			return fmt.Errorf("%s %s: %d %s", method, path, rec.status, rec.body.Bytes())
		}
		e.Error.Status = rec.status
		return &e.Error
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// recorder holds an in-process answer.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	wrote  bool
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) Write(b []byte) (int, error) {
	r.wrote = true
	return r.body.Write(b)
}
func (r *recorder) WriteHeader(code int) {
	if !r.wrote {
		r.status, r.wrote = code, true
	}
}
