package adminsock

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/blueline-app/blueline/client"
)

// Client talks to the running daemon on this host over its admin socket:
// the admin commands (keys, the simulator, webhooks' deliveries, backups)
// and, through HTTPClient, the API as the host's operator.
type Client struct {
	http *http.Client
}

// NewClient is the admin client of the daemon with data folder dir. It
// sends nothing to a socket that may not be the daemon's (ErrUntrusted).
func NewClient(dir string) *Client {
	return &Client{http: &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{DialContext: Dialer(dir)},
	}}
}

// Do sends a request and decodes a successful answer into out. An answer in
// the error shape comes back as *client.Error.
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, BaseURL+path, body)
	if err != nil {
		return err
	}
	resp, err := c.send(c.http, req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return client.ResponseError(resp)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil || out == nil {
		return err
	}
	return json.Unmarshal(data, out)
}

// Stream makes a GET whose answer may take long to read (a backup): unlike
// Do, it has no overall timeout, only ctx. The caller reads the body and
// closes it; a body cut short reads as an error (io.ErrUnexpectedEOF).
func (c *Client) Stream(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, BaseURL+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := c.send(c.HTTPClient(), req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, client.ResponseError(resp)
	}
	return resp.Body, nil
}

// HTTPClient is an HTTP client over the admin socket without a timeout of
// its own, for the API the socket serves (/v1/…, as the host's operator)
// and its event stream. Requests go to BaseURL.
func (c *Client) HTTPClient() *http.Client { return &http.Client{Transport: c.http.Transport} }

// send makes a request, reporting a socket refused, or nobody answering
// on it, without the request's URL around it: the socket is what failed.
func (c *Client) send(hc *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := hc.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok && (errors.Is(err, ErrUntrusted) || errors.Is(err, ErrDaemonNotRunning)) {
			return nil, ue.Err
		}
		return nil, err
	}
	return resp, nil
}
