package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"

	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/listener"
)

// apiListener is where the API is served: plain HTTP on [server] listen, or
// HTTPS with certificates from an ACME CA when [tls] lists domains.
type apiListener struct {
	plain net.Listener
	tls   *listener.TLS
}

// listenAPI binds the API's listener. It may face the internet: at most
// max_connections connections (more wait to be accepted), of which
// unauthenticated ones, and those of any one address, may hold only a
// share; heads of at most 64 KiB read within 10 s, bodies cut off when
// nothing arrives for body_idle_timeout.
func listenAPI(cfg *config.Config, log *slog.Logger) (apiListener, error) {
	limits := listener.Limits{Max: cfg.Limits.MaxConnections, TrustedProxies: cfg.Server.Proxies(), Log: log}
	if !cfg.TLS.Enabled() {
		ln, err := net.Listen("tcp", cfg.Server.Listen)
		if err != nil {
			return apiListener{}, listener.Error(cfg.Server.ListenSetting(), cfg.Server.Listen, err)
		}
		return apiListener{plain: listener.Limit(ln, limits)}, nil
	}
	t := cfg.TLS
	roots, err := cfg.TLSRoots()
	if err != nil {
		return apiListener{}, err
	}
	s, err := listener.ListenTLS(listener.TLSOptions{
		Domains: t.Domains, Email: t.Email, CA: t.DirectoryURL(), TrustedRoots: roots,
		HTTPListen: t.HTTPListen, HTTPSListen: t.HTTPSListen, StorageDir: filepath.Join(cfg.DataDir(), "certmagic"),
		RenewCheckInterval: t.RenewCheck.Duration,
	}, log)
	if err != nil {
		return apiListener{}, err
	}
	s.LimitConnections(limits)
	return apiListener{tls: s}, nil
}

// publicBaseURL is the URL clients reach the API at, from the address
// really bound (port 0 picks one).
func (l apiListener) publicBaseURL(cfg *config.Config) string {
	bound := *cfg
	if l.tls != nil {
		bound.TLS.HTTPSListen = l.Addr().String()
	} else {
		bound.Server.Listen = l.Addr().String()
	}
	return bound.PublicBaseURL()
}

// shutdown stops serving api: with TLS, certificate management too.
func (l apiListener) shutdown(ctx context.Context, api *http.Server) error {
	if l.tls != nil {
		return l.tls.Shutdown(ctx)
	}
	return api.Shutdown(ctx)
}

// Addr is the API's address: HTTPS when TLS is on.
func (l apiListener) Addr() net.Addr {
	if l.tls != nil {
		return l.tls.Addr()
	}
	return l.plain.Addr()
}

// Close releases the listeners of an API that will not be served.
func (l apiListener) Close() error {
	if l.tls != nil {
		return l.tls.Close()
	}
	return l.plain.Close()
}

// serve starts serving api, and with TLS obtaining its certificates.
func (l apiListener) serve(api *http.Server, log *slog.Logger) {
	if l.tls == nil {
		go serveUntilClosed(api, l.plain, log)
		return
	}
	l.tls.Serve(api)
}

func serveUntilClosed(s *http.Server, l net.Listener, log *slog.Logger) {
	if err := s.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Error("listener stopped", "addr", l.Addr().String(), "err", err)
	}
}
