package listener

// Automatic HTTPS with certmagic. Not certmagic.HTTPS(): it blocks and
// cannot be shut down. Here the certificates live in a Config of our own
// with file storage under the data folder, the API is served by our own
// http.Server with that Config's TLS settings, and a second server on the
// HTTP port answers the CA's HTTP-01 challenges and redirects everything
// else to HTTPS. certmagic renews in the background; a renewed certificate
// is served from the next handshake on.

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/certmagic"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// TLSOptions configure automatic HTTPS.
type TLSOptions struct {
	Domains      []string       // names to obtain certificates for; the first is the default
	Email        string         // the ACME account's contact, optional
	CA           string         // the ACME directory URL
	TrustedRoots *x509.CertPool // roots for the CA's own HTTPS; nil: the system's
	HTTPListen   string         // host:port for HTTP-01 challenges and redirects
	HTTPSListen  string         // host:port for the API
	StorageDir   string         // where the account, certificates and keys are kept

	// RenewCheckInterval is how often certificates are checked for
	// renewal; zero takes certmagic's default, 10 minutes. A certificate is
	// renewed when a third of its lifetime is left, or earlier if the CA
	// suggests it (ACME renewal information).
	RenewCheckInterval time.Duration
}

// TLS serves the API over HTTPS with certificates from an ACME CA.
type TLS struct {
	opts      TLSOptions
	log       *slog.Logger
	httpsLn   net.Listener
	httpLn    net.Listener
	httpsPort string // as bound, for redirects

	cache   *certmagic.Cache
	magic   *certmagic.Config
	issuer  *certmagic.ACMEIssuer
	storage *countedStorage

	api      *http.Server // set by Serve
	redirect *http.Server
	stop     context.CancelFunc // ends certificate management
	served   sync.WaitGroup     // the two Serve loops
	stopped  sync.Once          // the cache's maintenance
}

// ListenTLS binds the HTTPS and HTTP addresses and prepares certificate
// management. Nothing is obtained before Serve; call Close instead if Serve
// is never called.
func ListenTLS(opts TLSOptions, logger *slog.Logger) (_ *TLS, err error) {
	if len(opts.Domains) == 0 {
		return nil, errors.New("tls: no domains")
	}
	t := &TLS{opts: opts, log: logger}
	if t.httpsLn, err = net.Listen("tcp", opts.HTTPSListen); err != nil {
		return nil, Error("[tls] https_listen", opts.HTTPSListen, err)
	}
	if t.httpLn, err = net.Listen("tcp", opts.HTTPListen); err != nil {
		t.httpsLn.Close()
		return nil, Error("[tls] http_listen", opts.HTTPListen, err)
	}
	_, t.httpsPort, _ = net.SplitHostPort(t.httpsLn.Addr().String())

	zl := zap.New(slogCore{logger.Handler()}).Named("certmagic")
	t.storage = &countedStorage{FileStorage: &certmagic.FileStorage{Path: opts.StorageDir}}
	t.cache = certmagic.NewCache(certmagic.CacheOptions{
		GetConfigForCert:   func(certmagic.Certificate) (*certmagic.Config, error) { return t.magic, nil },
		RenewCheckInterval: opts.RenewCheckInterval,
		Logger:             zl,
	})
	t.magic = certmagic.New(t.cache, certmagic.Config{
		DefaultServerName: opts.Domains[0], // for clients that send no name (by IP)
		Storage:           t.storage,
		Logger:            zl,
	})
	// The HTTP-01 challenge is answered by our own server on http_listen:
	// certmagic's solver finds that address taken and leaves it to us.
	// TLS-ALPN is off: the HTTP server is there anyway, and one way to
	// validate is easier to reason about.
	host, port, _ := net.SplitHostPort(t.httpLn.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "" // all interfaces
	}
	httpPort, _ := strconv.Atoi(port)
	t.issuer = certmagic.NewACMEIssuer(t.magic, certmagic.ACMEIssuer{
		CA:                      opts.CA,
		Email:                   opts.Email,
		Agreed:                  true,
		TrustedRoots:            opts.TrustedRoots,
		DisableTLSALPNChallenge: true,
		ListenHost:              host,
		AltHTTPPort:             httpPort,
		Logger:                  zl,
	})
	t.magic.Issuers = []certmagic.Issuer{t.issuer}
	return t, nil
}

// Addr is the address the API is served on over HTTPS.
func (t *TLS) Addr() net.Addr { return t.httpsLn.Addr() }

// HTTPAddr is the address of the challenge and redirect server.
func (t *TLS) HTTPAddr() net.Addr { return t.httpLn.Addr() }

// LimitConnections holds each of the HTTPS and HTTP listeners to l (see
// Limit); a flood on the HTTP port then cannot keep the API from being
// served. Call it before Serve.
func (t *TLS) LimitConnections(l Limits) {
	t.httpsLn = Limit(t.httpsLn, l)
	t.httpLn = Limit(t.httpLn, l)
}

// Serve starts obtaining certificates (or loading them from storage) and
// serving: api over HTTPS, the challenge and redirect server over HTTP. It
// sets api's TLSConfig, and its ErrorLog so that failed handshakes, which
// scanners cause all day, are logged at debug level. Until a certificate is
// obtained, HTTPS handshakes fail.
func (t *TLS) Serve(api *http.Server) {
	tc := t.magic.TLSConfig()
	tc.NextProtos = append([]string{"h2", "http/1.1"}, tc.NextProtos...)
	tc.MinVersion = tls.VersionTLS12
	api.TLSConfig = tc
	api.ErrorLog = log.New(serverErrors{t.log}, "", 0)
	t.api = api
	t.redirect = &http.Server{
		Handler:           t.issuer.HTTPChallengeHandler(http.HandlerFunc(t.toHTTPS)),
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    MaxHeaderBytes,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          api.ErrorLog,
	}
	t.served.Go(func() { t.serve("https", t.httpsLn, func() error { return api.ServeTLS(t.httpsLn, "", "") }) })
	t.served.Go(func() { t.serve("http", t.httpLn, func() error { return t.redirect.Serve(t.httpLn) }) })

	t.log.Info("serving the API over HTTPS", "domains", t.opts.Domains, "https", t.httpsLn.Addr().String(),
		"http", t.httpLn.Addr().String(), "ca", t.opts.CA)
	ctx, stop := context.WithCancel(context.Background())
	t.stop = stop
	// ManageAsync returns at once; obtaining and renewing go on in the
	// background, with retries, and log through slog.
	if err := t.magic.ManageAsync(ctx, t.opts.Domains); err != nil {
		t.log.Error("certificate management", "err", err)
	}
}

func (t *TLS) serve(name string, ln net.Listener, serve func() error) {
	if err := serve(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		t.log.Error("listener stopped", "server", name, "addr", ln.Addr().String(), "err", err)
	}
}

// toHTTPS answers what reaches the HTTP server and is not a challenge it
// knows: a 404 under the challenge path, else a permanent redirect to the
// same path over HTTPS (308 keeps the method and body). The host is one of
// the domains, never an arbitrary Host header.
func (t *TLS) toHTTPS(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/.well-known/acme-challenge/") {
		http.NotFound(w, r)
		return
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	if !slices.Contains(t.opts.Domains, host) {
		host = t.opts.Domains[0]
	}
	if t.httpsPort != "443" {
		host = net.JoinHostPort(host, t.httpsPort)
	}
	w.Header().Set("Connection", "close")
	http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
}

// Shutdown stops both servers (letting requests in flight finish), ends
// certificate management and waits, within ctx, for a certificate operation
// under way to let go of its storage lock.
func (t *TLS) Shutdown(ctx context.Context) error {
	if t.api == nil {
		return t.Close()
	}
	t.stop()
	var errs [2]error
	var wg sync.WaitGroup
	wg.Go(func() { errs[0] = t.api.Shutdown(ctx) })
	wg.Go(func() { errs[1] = t.redirect.Shutdown(ctx) })
	wg.Wait()
	t.served.Wait()
	t.stopped.Do(t.cache.Stop)
	return errors.Join(errs[0], errs[1], t.storage.idle(ctx))
}

// Close releases what ListenTLS took, for a TLS whose Serve was not called.
func (t *TLS) Close() error {
	t.stopped.Do(t.cache.Stop)
	return errors.Join(t.httpsLn.Close(), t.httpLn.Close())
}

// countedStorage is certmagic's file storage, counting the locks held: an
// obtain or renewal holds one from start to end.
type countedStorage struct {
	*certmagic.FileStorage
	mu       sync.Mutex
	held     int
	released chan struct{} // closed when held drops to 0, if someone waits
}

func (s *countedStorage) Lock(ctx context.Context, name string) error {
	err := s.FileStorage.Lock(ctx, name)
	if err == nil {
		s.add(1)
	}
	return err
}

func (s *countedStorage) TryLock(ctx context.Context, name string) (bool, error) {
	ok, err := s.FileStorage.TryLock(ctx, name)
	if ok && err == nil {
		s.add(1)
	}
	return ok, err
}

func (s *countedStorage) Unlock(ctx context.Context, name string) error {
	defer s.add(-1)
	return s.FileStorage.Unlock(ctx, name)
}

func (s *countedStorage) add(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held = max(s.held+n, 0)
	if s.held == 0 && s.released != nil {
		close(s.released)
		s.released = nil
	}
}

// idle waits until no lock is held.
func (s *countedStorage) idle(ctx context.Context) error {
	s.mu.Lock()
	if s.held == 0 {
		s.mu.Unlock()
		return nil
	}
	if s.released == nil {
		s.released = make(chan struct{})
	}
	released := s.released
	s.mu.Unlock()
	select {
	case <-released:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("certificate storage still locked: %w", ctx.Err())
	}
}

// serverErrors logs what an http.Server reports: at warn, except failed TLS
// handshakes, at debug.
type serverErrors struct{ log *slog.Logger }

func (e serverErrors) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelWarn
	if strings.Contains(msg, "TLS handshake error") {
		level = slog.LevelDebug
	}
	e.log.Log(context.Background(), level, msg)
	return len(p), nil
}

// slogCore is the zap core certmagic logs through: each entry becomes a
// slog record, its logger name ("certmagic.obtain"…) an attribute.
type slogCore struct{ h slog.Handler }

func (c slogCore) Enabled(l zapcore.Level) bool {
	return c.h.Enabled(context.Background(), slogLevel(l))
}

func (c slogCore) With(fields []zapcore.Field) zapcore.Core {
	return slogCore{c.h.WithAttrs(slogAttrs(fields))}
}

func (c slogCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c slogCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	r := slog.NewRecord(e.Time, slogLevel(e.Level), e.Message, 0)
	if e.LoggerName != "" {
		r.AddAttrs(slog.String("logger", e.LoggerName))
	}
	r.AddAttrs(slogAttrs(fields)...)
	return c.h.Handle(context.Background(), r)
}

func (slogCore) Sync() error { return nil }

func slogLevel(l zapcore.Level) slog.Level {
	switch {
	case l <= zapcore.DebugLevel:
		return slog.LevelDebug
	case l == zapcore.InfoLevel:
		return slog.LevelInfo
	case l == zapcore.WarnLevel:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// slogAttrs turns zap fields into attributes through zap's map encoder,
// which renders errors, durations, times and arrays as plain values.
func slogAttrs(fields []zapcore.Field) []slog.Attr {
	enc := zapcore.NewMapObjectEncoder()
	attrs := make([]slog.Attr, 0, len(fields))
	for _, f := range fields {
		f.AddTo(enc)
		if v, ok := enc.Fields[f.Key]; ok {
			attrs = append(attrs, slog.Any(f.Key, v))
		}
	}
	return attrs
}

// State says, for the console, which certificate each domain is served
// with: until when it is valid, or that none is held yet.
func (t *TLS) State() string {
	var parts []string
	for _, d := range t.opts.Domains {
		var until time.Time
		for _, c := range t.cache.AllMatchingCertificates(d) {
			if c.Leaf != nil && c.Leaf.NotAfter.After(until) {
				until = c.Leaf.NotAfter
			}
		}
		if until.IsZero() {
			parts = append(parts, d+": no certificate yet")
		} else {
			parts = append(parts, d+": certificate valid until "+until.UTC().Format("2006-01-02 15:04 UTC"))
		}
	}
	return strings.Join(parts, "; ")
}

// GetCertificate is the certificate for a TLS handshake with hello, from
// the certificates certmagic manages for the API's domains: for another
// listener of this host's names (a fleet's routes).
func (t *TLS) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return t.magic.GetCertificate(hello)
}
