package daemon

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"

	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/server"
)

// apiListener is where the API is served: plain HTTP on [server] listen, or
// HTTPS with certificates from an ACME CA when [tls] lists domains.
type apiListener struct {
	plain net.Listener
	tls   *server.TLS
}

func listenAPI(cfg *config.Config, log *slog.Logger) (apiListener, error) {
	if !cfg.TLS.Enabled() {
		ln, err := net.Listen("tcp", cfg.Server.Listen)
		if err != nil {
			return apiListener{}, listenError("[server] listen", cfg.Server.Listen, err)
		}
		return apiListener{plain: ln}, nil
	}
	t := cfg.TLS
	roots, err := cfg.TLSRoots()
	if err != nil {
		return apiListener{}, err
	}
	s, err := server.ListenTLS(server.TLSOptions{
		Domains: t.Domains, Email: t.Email, CA: t.DirectoryURL(), TrustedRoots: roots,
		HTTPListen: t.HTTPListen, HTTPSListen: t.HTTPSListen, StorageDir: filepath.Join(cfg.DataDir(), "certmagic"),
		RenewCheckInterval: t.RenewCheck.Duration,
	}, log)
	if err != nil {
		return apiListener{}, err
	}
	return apiListener{tls: s}, nil
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

// listenError says why address, the setting named by setting, could not be
// listened on, with the address once (net's own error repeats it) and what
// to do about the usual causes: a port in use, or one below 1024 without
// the privilege to bind it.
func listenError(setting, address string, err error) error {
	cause := err
	if oe, ok := errors.AsType[*net.OpError](err); ok {
		cause = oe.Err
		if se, ok := errors.AsType[*os.SyscallError](cause); ok {
			cause = se.Err
		}
	}
	var hint string
	switch {
	case errors.Is(err, syscall.EADDRINUSE):
		hint = "another program (another blueline?) is listening there; stop it, or set " + setting + " to another port"
	case errors.Is(err, syscall.EACCES) || errors.Is(err, os.ErrPermission):
		hint = "this user may not listen there"
		if _, port, perr := net.SplitHostPort(address); perr == nil {
			if n, nerr := strconv.Atoi(port); nerr == nil && n > 0 && n < 1024 {
				hint = "ports below 1024 need root"
				if runtime.GOOS == "linux" {
					hint += " or the CAP_NET_BIND_SERVICE capability"
				}
			}
		}
		hint += "; set " + setting + " to a port from 1024 up, such as 8080, and put a reverse proxy in front if it must be served on a low port"
	}
	if hint == "" {
		return fmt.Errorf("listen on %s: %w", address, cause)
	}
	return fmt.Errorf("listen on %s: %w: %s", address, cause, hint)
}
