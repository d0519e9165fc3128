package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
)

// Overrides are settings given on the command line (or in the
// environment), above the file's: an empty string keeps the file's value.
// Source names where each came from, for errors ("--listen",
// "BLUELINE_LISTEN").
type Overrides struct {
	Listen, ListenSource string
	DataDir, DataSource  string
	// Dev allows webhook receivers on http:// and on loopback and private
	// addresses, for a developer's machine; see Config.Dev.
	Dev bool
}

// Apply sets the overrides over c and checks them as the file's values are
// checked. Dev is refused with TLS or a listen address reachable from
// other machines: it lifts the webhooks' guard against requests to the
// host's own network, which only a daemon nobody else reaches can afford.
func (c *Config) Apply(o Overrides) error {
	var errs []error
	fail := func(source, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{source}, args...)...))
	}
	if o.Listen != "" {
		// The file's own check, its words without the file's name.
		k := &checker{}
		if checkListen(k, "", o.Listen, "127.0.0.1:8080") {
			c.Server.Listen, c.Server.ListenFrom = o.Listen, o.ListenSource
		} else if fe, ok := errors.AsType[*fileError](k.errs[0]); ok {
			fail(o.ListenSource, "%v", fe.err)
		}
	}
	if o.DataDir != "" {
		if strings.TrimSpace(o.DataDir) == "" {
			fail(o.DataSource, "must not be blank")
		} else {
			c.Storage.Dir = o.DataDir
		}
	}
	if o.Dev {
		switch {
		case c.TLS.Enabled():
			fail("--dev", "is for a daemon on this machine alone, and %s turns on TLS (tls.domains): leave out --dev, or serve without [tls]", c.name())
		case !loopbackListen(c.Server.Listen):
			fail("--dev", "is for a daemon on this machine alone, and the API listens on %q, which other machines can reach: listen on 127.0.0.1, ::1 or localhost (--listen 127.0.0.1:8080)", c.Server.Listen)
		default:
			c.Dev = true
			c.Webhooks.AllowHTTP, c.Webhooks.AllowPrivateNetworks = true, true
		}
	}
	return errors.Join(errs...)
}

// name is the document the configuration was read from, as errors name it.
func (c *Config) name() string {
	if c.Path == "" {
		return defaultName
	}
	return c.Path
}

// loopbackListen reports whether a listen address accepts connections from
// this machine only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
