package config

import (
	"crypto/x509"
	"fmt"
	"os"
)

// TLSRoots is the certificate pool the ACME client trusts: the system's roots
// plus [tls] trusted_roots, or nil (the system's alone) when that is unset.
func (c *Config) TLSRoots() (*x509.CertPool, error) {
	return c.certPool("tls.trusted_roots", c.TLS.TrustedRoots)
}

// WebhookRoots is the certificate pool webhook receivers are checked
// against: the system's roots plus [webhooks] ca_file, or nil (the system's
// alone) when that is unset.
func (c *Config) WebhookRoots() (*x509.CertPool, error) {
	return c.certPool("webhooks.ca_file", c.Webhooks.CAFile)
}

// certPool loads the PEM file at path, the setting key, with an error naming
// the configuration and the key.
func (c *Config) certPool(key, path string) (*x509.CertPool, error) {
	if path == "" {
		return nil, nil
	}
	pool, err := loadCertPool(path)
	if err != nil {
		name := c.Path
		if name == "" {
			name = defaultName
		}
		return nil, &fileError{file: name, key: key, err: err}
	}
	return pool, nil
}

// loadCertPool is the system's roots (none, where they cannot be read) plus
// the certificates of the PEM file at path. It is the one place a PEM file of
// roots is read, for the checks of Load as for the daemon.
func loadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", path)
	}
	return pool, nil
}
