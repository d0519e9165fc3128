package listener

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"syscall"
)

// Error says why address, the setting named by setting, could not be
// listened on (the API's, or with TLS its HTTPS and HTTP listeners), with
// the address once (net's own error repeats it) and what to do about the
// usual causes: a port in use, or one below 1024 without the privilege to
// bind it.
func Error(setting, address string, err error) error {
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
