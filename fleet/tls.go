package fleet

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// RouteTLSFromFiles is the routes' TLS configuration from PEM files: this
// node's certificate and key, and the fleet's CA. It is mutual: a node
// accepts a route only from a peer whose certificate the CA signed, and
// dials only peers whose certificate it signed for the name in the route
// URL. Options.RouteTLS takes it; with Options.URL it serves as ClientTLS.
func RouteTLSFromFiles(certFile, keyFile, caFile string) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("fleet: TLS certificate: %w", err)
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("fleet: TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("fleet: TLS CA: %s holds no PEM certificate", caFile)
	}
	return &tls.Config{
		MinVersion:   tls.VersionTLS12,
		Certificates: []tls.Certificate{cert},
		RootCAs:      pool,
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
	}, nil
}

// RouteTLSFromCertificate is the routes' TLS configuration from a
// certificate this node already has for its name, such as the API's from
// an ACME CA (getCert): the routes are encrypted and each node proves its
// name to the peers that dial it, whose roots verify it; a dialing peer
// proves nothing by certificate (an ACME CA's certificates may not be
// usable as a client's) but by the route password derived from the fleet's
// secret, without which no route is accepted.
func RouteTLSFromCertificate(getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error), roots *x509.CertPool) *tls.Config {
	return &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: getCert,
		RootCAs:        roots,
		ClientAuth:     tls.NoClientCert,
	}
}
