package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// The client commands (send, react, typing, read, lines, chats, messages,
// files, outbox, webhooks create|delete, sandbox status|activate, listen)
// speak the HTTP API through package client, as the reference service's
// CLI speaks it through its SDK. On the host they reach the local daemon
// through its admin socket, as the host's operator (or, with --owner, as
// that owner), with no key; elsewhere --base-url (or $BLUELINE_BASE_URL)
// names the daemon and $BLUELINE_API_KEY is the key.

// Environment variables of the client commands.
const (
	envBaseURL = "BLUELINE_BASE_URL"
	envAPIKey  = "BLUELINE_API_KEY"
)

// apiFlags are the flags every client command has.
type apiFlags struct {
	baseURL string
	owner   string
	json    bool
}

// add puts the flags on c.
func (f *apiFlags) add(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.baseURL, "base-url", "", "the daemon's URL, to reach it over the network with $"+envAPIKey+" (default $"+envBaseURL+"; none: the local daemon, through its admin socket)")
	fl.StringVar(&f.owner, "owner", "", "on the host: act as this owner (a key owner's sandbox) rather than as the host's operator")
	fl.BoolVar(&f.json, "json", false, "print JSON")
}

// apiConn is a client of the daemon, local or remote.
type apiConn struct {
	*client.Client
	local  bool
	socket string // the admin socket, when local
}

// connect makes the client that f names: remote with --base-url (or
// $BLUELINE_BASE_URL) and $BLUELINE_API_KEY, else local over the admin
// socket of the configuration's daemon. wrap, if not nil, wraps the
// transport (listen watches its stream's connections).
func (a *app) connect(f *apiFlags, wrap func(http.RoundTripper) http.RoundTripper) (*apiConn, error) {
	base := f.baseURL
	if base == "" {
		base = a.env.getenv(envBaseURL)
	}
	ua := client.WithUserAgent("blueline-cli/" + a.build.Version)
	if base != "" {
		if f.owner != "" {
			return nil, usageErrorf("--owner is for the host: over --base-url, the key's owner is who acts")
		}
		u, err := url.Parse(base)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErrorf("--base-url %q is not an http:// or https:// URL", base)
		}
		key := strings.TrimSpace(a.env.getenv(envAPIKey))
		if key == "" {
			return nil, usageErrorf("--base-url needs an API key in $%s", envAPIKey)
		}
		hc := http.DefaultClient
		if wrap != nil {
			hc = &http.Client{Transport: wrap(http.DefaultTransport)}
		}
		return &apiConn{Client: client.New(base, client.WithAPIKey(key), client.WithHTTPClient(hc), ua)}, nil
	}
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	hc := adminsock.NewClient(cfg.DataDir()).HTTPClient()
	rt := hc.Transport
	if owner := strings.TrimSpace(f.owner); owner != "" {
		rt = ownerTransport{owner: owner, next: rt}
	}
	if wrap != nil {
		rt = wrap(rt)
	}
	hc.Transport = rt
	return &apiConn{Client: client.New(adminsock.BaseURL, client.WithHTTPClient(hc), ua), local: true,
		socket: adminsock.Path(cfg.DataDir())}, nil
}

// ownerTransport makes each request over the admin socket act as owner.
type ownerTransport struct {
	owner string
	next  http.RoundTripper
}

func (t ownerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set(api.OwnerHeader, t.owner)
	return t.next.RoundTrip(r)
}

// apiRun is the RunE of a client command: it connects as f says, runs
// run, and words its error for the command line: an API error as the
// API's message and code, a local daemon that does not answer as such.
func (a *app) apiRun(f *apiFlags, run func(ctx context.Context, c *apiConn, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		c, err := a.connect(f, nil)
		if err != nil {
			return err
		}
		return c.explain(run(cmd.Context(), c, args))
	}
}

// explain words err, from a call of c, for the command line.
func (c *apiConn) explain(err error) error {
	if err == nil || errors.Is(err, errUsage) {
		return err
	}
	if e, ok := errors.AsType[*client.Error](err); ok {
		msg := e.Message
		if msg == "" {
			msg = http.StatusText(e.Status)
		}
		if e.Code != "" {
			msg += " (" + e.Code + ")"
		}
		if c.local && e.Code == "sandbox_requires_owner" {
			msg += "\nOn the host, act as a key owner with --owner NAME."
		}
		return errors.New(msg)
	}
	if c.local {
		if errors.Is(err, adminsock.ErrUntrusted) {
			if ue, ok := errors.AsType[*url.Error](err); ok {
				return ue.Err
			}
		}
		if errors.Is(err, adminsock.ErrDaemonNotRunning) {
			return fmt.Errorf("%w (no answer on %s): start it with `blueline serve`, or pass --base-url", adminsock.ErrDaemonNotRunning, c.socket)
		}
	}
	return err
}

// resolveFrom is the line a command sends from: from when given, else the
// only active line the caller may use, else (the sandbox line being open to
// every key) the only active line other than the sandbox line. Several
// lines to choose from is a usage error that names them.
func resolveFrom(ctx context.Context, c *apiConn, from string) (string, error) {
	if from != "" {
		return from, nil
	}
	lines, err := c.Lines.List(ctx)
	if err != nil {
		return "", err
	}
	var active, own []string
	for _, l := range lines {
		if !l.IsActive {
			continue
		}
		active = append(active, l.Handle)
		if !l.IsSandbox {
			own = append(own, l.Handle)
		}
	}
	switch {
	case len(active) == 1:
		return active[0], nil
	case len(own) == 1:
		return own[0], nil
	case len(active) == 0:
		return "", usageErrorf("no active line: pass --from HANDLE (see `blueline lines list`)")
	}
	return "", usageErrorf("several lines (%s): pick one with --from HANDLE", strings.Join(active, ", "))
}

// printResult prints what a write answered: as JSON, or a headline and
// the answer's fields.
func printResult(w io.Writer, asJSON bool, headline string, v any) error {
	if asJSON {
		return printJSON(w, v)
	}
	fmt.Fprintln(w, printable(headline))
	return printFields(w, "    ", v)
}

// printFields prints v's JSON fields, in order, one "name  value" per
// line, aligned: nulls and request_id left out, times (…_at, Unix ms) in
// RFC 3339, objects and arrays as compact JSON, strings printable.
func printFields(w io.Writer, indent string, v any) error {
	fields, err := jsonFields(v)
	if err != nil {
		return err
	}
	width := 0
	for _, f := range fields {
		width = max(width, len(f[0]))
	}
	for _, f := range fields {
		if _, err := fmt.Fprintf(w, "%s%-*s  %s\n", indent, width, f[0], printable(f[1])); err != nil {
			return err
		}
	}
	return nil
}

// jsonFields is v's top-level JSON fields, in order, as printFields shows
// them.
func jsonFields(v any) ([][2]string, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	// The fields in the document's order: a map would lose it.
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, fmt.Errorf("not a JSON object: %s", data)
	}
	var keys []string
	obj := map[string]json.RawMessage{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		k, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, err
		}
		if _, dup := obj[k]; !dup {
			keys = append(keys, k)
		}
		obj[k] = raw
	}
	var out [][2]string
	for _, k := range keys {
		raw := obj[k]
		if k == "request_id" || string(raw) == "null" {
			continue
		}
		out = append(out, [2]string{k, fieldValue(k, raw)})
	}
	return out, nil
}

// fieldValue is how printFields shows one value.
func fieldValue(key string, raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n int64
	if strings.HasSuffix(key, "_at") && json.Unmarshal(raw, &n) == nil && n > 1e10 {
		return msTime(n)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

// msTime is a Unix ms time as the CLI prints times.
func msTime(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(time.RFC3339)
}

// optMsTime is msTime of a time that may be absent ("-").
func optMsTime(ms *int64) string {
	if ms == nil {
		return "-"
	}
	return msTime(*ms)
}

// orNil is the value of s, "-" when nil or empty.
func orNil(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// unpaged is a list the API never pages (lines, typing indicators,
// webhooks) in the API's envelope, for --json. The client returns only
// its items: there is no request_id to print.
type unpaged[T any] struct {
	Data       []T     `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

// listJSON is items in the API's envelope.
func listJSON[T any](items []T) unpaged[T] {
	if items == nil {
		items = []T{}
	}
	return unpaged[T]{Data: items}
}

// printList prints one page of a list: the envelope with --json, else a
// table, and, when more pages follow, the cursor of the next on stderr.
func (a *app) printList(asJSON bool, page any, header []string, rows [][]string, next string) error {
	if asJSON {
		return printJSON(a.stdout, page)
	}
	if err := printTable(a.stdout, header, rows); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(a.stderr, "more: pass --cursor %s for the next page\n", next)
	}
	return nil
}

// truncate cuts s to n characters, marking the cut, on one line.
func truncate(s string, n int) string {
	s = oneLine(s)
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
