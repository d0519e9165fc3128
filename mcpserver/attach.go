package mcpserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/mediatype"
)

// fetchTimeout bounds fetching an attachment from a URL.
const fetchTimeout = time.Minute

// attach turns send_message's attachment into a file_ ID: as given, by
// uploading a URL's content, or by uploading a local file under AttachDir.
// What a contact writes can steer an agent, so an agent must not be able to
// send them the host's files or the answers of services on its network:
// local paths need AttachDir (never set over HTTP), URLs must reach public
// addresses (unless AllowPrivateURLs).
func (t *tools) attach(ctx context.Context, c *client.Client, ref string) (string, error) {
	switch {
	case strings.HasPrefix(ref, "file_"):
		return ref, nil
	case strings.HasPrefix(ref, "https://"), strings.HasPrefix(ref, "http://"):
		return t.attachURL(ctx, c, ref)
	default:
		return t.attachPath(ctx, c, ref)
	}
}

func (t *tools) attachPath(ctx context.Context, c *client.Client, p string) (string, error) {
	if t.opts.AttachDir == "" {
		return "", errors.New("attachment: local files cannot be attached here; give a file_ ID or an http(s) URL " +
			"(the stdio server allows files of one folder with `blueline mcp --attach-dir DIR`)")
	}
	dir, err := filepath.Abs(t.opts.AttachDir)
	if err != nil {
		return "", fmt.Errorf("attachment: %w", err)
	}
	rel := p
	if filepath.IsAbs(p) {
		if rel, err = filepath.Rel(dir, p); err != nil {
			return "", fmt.Errorf("attachment: %s is not in %s, the only folder files may be attached from", p, dir)
		}
	}
	if !filepath.IsLocal(rel) {
		return "", fmt.Errorf("attachment: %s is not in %s, the only folder files may be attached from", p, dir)
	}
	// os.Root refuses to follow a symbolic link out of the folder.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("attachment: %w", err)
	}
	defer root.Close()
	f, err := root.Open(rel)
	if err != nil {
		return "", fmt.Errorf("attachment: %w", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		return "", fmt.Errorf("attachment: %s is not a regular file", p)
	}
	name := filepath.Base(rel)
	file, err := c.Files.Upload(ctx, name, f, mediatype.ByName(name))
	if err != nil {
		return "", apiError(err)
	}
	return file.ID, nil
}

// attachURL fetches a URL and uploads what it answers. A failure says only
// that the URL could not be fetched and the kind of reason (fetchReason):
// never an address, a resolver's words or anything the far end sent, which
// would let an agent (or a contact steering it) map the daemon's network.
func (t *tools) attachURL(ctx context.Context, c *client.Client, raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "", errors.New("attachment: not an http(s) URL")
	}
	ctx, cancel := context.WithTimeout(ctx, fetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", errors.New("attachment: not an http(s) URL")
	}
	resp, err := t.fetcher().Do(req)
	if err != nil {
		return "", fetchFailed(fetchReason(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fetchFailed(fmt.Sprintf("HTTP %d", resp.StatusCode))
	}
	name := path.Base(resp.Request.URL.Path)
	if name == "/" || name == "." {
		name = ""
	}
	mt, err := mediatype.Parse(resp.Header.Get("Content-Type"))
	if err != nil || strings.HasPrefix(mt, "application/octet-stream") {
		mt = mediatype.ByName(name)
	}
	body := &fetchBody{r: resp.Body}
	file, err := c.Files.Upload(ctx, name, body, mt)
	if ferr := body.failure(); ferr != nil {
		return "", fetchFailed(fetchReason(ferr))
	}
	if e, ok := errors.AsType[*client.Error](err); ok && e.Code == "file_too_large" {
		return "", fetchFailed("too large (" + e.Message + ")")
	}
	if err != nil {
		return "", apiError(err)
	}
	return file.ID, nil
}

// fetchFailed is the error of an attachment URL that could not be fetched.
func fetchFailed(reason string) error {
	return errors.New("attachment: the URL could not be fetched: " + reason)
}

// fetchReason names the kind of a fetch's failure without its details.
func fetchReason(err error) string {
	var (
		dnsErr  *net.DNSError
		netErr  net.Error
		certErr *tls.CertificateVerificationError
		recErr  tls.RecordHeaderError
		alert   tls.AlertError
	)
	switch {
	case errors.Is(err, errPrivate):
		return "not a public address"
	case errors.Is(err, errTooManyRedirects):
		return "too many redirects"
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		return "timed out"
	case errors.Is(err, context.Canceled):
		return "the call was cancelled"
	case errors.As(err, &dnsErr):
		return "its host name did not resolve"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.As(err, &certErr):
		return "its TLS certificate could not be verified"
	case errors.As(err, &recErr), errors.As(err, &alert):
		return "the TLS handshake failed"
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET):
		return "the connection was cut off"
	}
	return "the connection failed"
}

// fetchBody is a fetched body being uploaded; it keeps the first error of
// reading it, which the upload's own error would otherwise carry (or hide).
type fetchBody struct {
	r   io.Reader
	mu  sync.Mutex // the in-process API reads it on a goroutine of its own
	err error
}

func (b *fetchBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.err == nil {
			b.err = err
		}
		b.mu.Unlock()
	}
	return n, err
}

func (b *fetchBody) failure() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.err
}

// fetcher is the HTTP client that fetches attachments: no proxy, and every
// connection (redirects included) checked on the address really dialled.
func (t *tools) fetcher() *http.Client {
	d := &net.Dialer{Timeout: 10 * time.Second}
	if !t.opts.AllowPrivateURLs {
		d.Control = checkDial
	}
	return &http.Client{
		Transport: &http.Transport{
			DialContext: d.DialContext, TLSHandshakeTimeout: 10 * time.Second, ResponseHeaderTimeout: 30 * time.Second,
			DisableKeepAlives: true,
		},
		// net/http's own limit is the same, in words that cannot be told
		// from other failures.
		CheckRedirect: func(_ *http.Request, via []*http.Request) error {
			if len(via) >= maxRedirects {
				return errTooManyRedirects
			}
			return nil
		},
	}
}

const maxRedirects = 10

var errTooManyRedirects = errors.New("too many redirects")

// errPrivate refuses an address that is not globally reachable.
var errPrivate = errors.New("not a public address; attachments are fetched from public addresses only")

func checkDial(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("cannot check address %q", address)
	}
	if !isPublic(ap.Addr()) {
		return fmt.Errorf("%s is %w", ap.Addr(), errPrivate)
	}
	return nil
}

// notPublic are the ranges the IANA special-purpose registries mark not
// globally reachable, beyond what netip's predicates cover.
var notPublic = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),
	netip.MustParsePrefix("100.64.0.0/10"),
	netip.MustParsePrefix("192.0.0.0/24"),
	netip.MustParsePrefix("192.0.2.0/24"),
	netip.MustParsePrefix("192.88.99.0/24"),
	netip.MustParsePrefix("198.18.0.0/15"),
	netip.MustParsePrefix("198.51.100.0/24"),
	netip.MustParsePrefix("203.0.113.0/24"),
	netip.MustParsePrefix("240.0.0.0/4"),
	netip.MustParsePrefix("64:ff9b::/96"),
	netip.MustParsePrefix("64:ff9b:1::/48"),
	netip.MustParsePrefix("100::/64"),
	netip.MustParsePrefix("2001::/23"),
	netip.MustParsePrefix("2001:db8::/32"),
	netip.MustParsePrefix("2002::/16"),
	netip.MustParsePrefix("3fff::/20"),
	netip.MustParsePrefix("5f00::/16"),
}

var globalUnicast6 = netip.MustParsePrefix("2000::/3")

func isPublic(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() {
		return false
	}
	if a.Is6() && !globalUnicast6.Contains(a) {
		return false
	}
	for _, p := range notPublic {
		if p.Contains(a) {
			return false
		}
	}
	return true
}
