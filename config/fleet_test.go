package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/config"
)

const fleetSecret = "0123456789abcdef0123456789abcdef"

func TestFleetOffByDefault(t *testing.T) {
	for name, c := range map[string]*config.Config{
		"embedded default": config.Default(),
		"no [fleet]":       mustLoad(t, oneLine),
		"empty [fleet]":    mustLoad(t, "[fleet]\n"+oneLine),
		"defaults written": mustLoad(t, "[fleet]\nlisten = \"127.0.0.1:4222\"\nroutes = []\nsecret = \"\"\n"+oneLine),
	} {
		if c.Fleet.On() || c.Fleet.Embedded() {
			t.Errorf("%s: fleet on (%+v), want off", name, c.Fleet)
		}
	}
}

func TestFleetValid(t *testing.T) {
	c := mustLoad(t, "[fleet]\nnode = \"mac-a\"\nlisten = \"127.0.0.1:0\"\ncluster = \"127.0.0.1:6222\"\n"+
		"routes = [\"nats://127.0.0.1:6222\", \"nats://localhost:6223\"]\nsecret = \""+fleetSecret+"\"\n"+oneLine)
	if !c.Fleet.On() || !c.Fleet.Embedded() || c.Fleet.Node != "mac-a" || len(c.Fleet.Routes) != 2 {
		t.Errorf("Fleet = %+v, want an embedded node mac-a with two routes", c.Fleet)
	}
	if got := c.FleetRouteTLS(); got != config.FleetTLSNone {
		t.Errorf("FleetRouteTLS() = %q, want none", got)
	}
	if !strings.HasSuffix(c.FleetStoreDir(), "blueline-data/fleet") {
		t.Errorf("FleetStoreDir() = %q", c.FleetStoreDir())
	}

	// Remote routes with the fleet's own TLS files.
	cert, key, ca := fleetCert(t)
	c = mustLoad(t, "[fleet]\nnode = \"mac-a\"\ncluster = \"0.0.0.0:6222\"\nroutes = [\"nats://mac-b:6222\", \"nats://10.0.0.3:6222\"]\n"+
		"secret = \""+fleetSecret+"\"\ntls_cert = \""+cert+"\"\ntls_key = \""+key+"\"\ntls_ca = \""+ca+"\"\n"+oneLine)
	if got := c.FleetRouteTLS(); got != config.FleetTLSFiles {
		t.Errorf("FleetRouteTLS() = %q, want files", got)
	}

	// Or with the [tls] section's certificates.
	c = mustLoad(t, "[tls]\ndomains = [\"mac-a.example.com\"]\n[fleet]\nnode = \"mac-a\"\ncluster = \"0.0.0.0:6222\"\n"+
		"routes = [\"nats://mac-b.example.com:6222\"]\nsecret = \""+fleetSecret+"\"\n"+oneLine)
	if got := c.FleetRouteTLS(); got != config.FleetTLSACME {
		t.Errorf("FleetRouteTLS() = %q, want acme", got)
	}

	// An existing NATS.
	c = mustLoad(t, "[fleet]\nnode = \"mac-a\"\nurl = \"nats://u:p@nats.internal:4222, tls://nats2.internal:4222\"\nsecret = \""+fleetSecret+"\"\n"+oneLine)
	if !c.Fleet.On() || c.Fleet.Embedded() {
		t.Errorf("Fleet = %+v, want on, not embedded", c.Fleet)
	}
}

func TestFleetRefusals(t *testing.T) {
	const secret = "secret = \"" + fleetSecret + "\"\n"
	cert, key, ca := fleetCert(t)
	notPEM := writeFile(t, "not.pem", []byte("nothing here\n"))
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"no secret", "node = \"mac-a\"\n",
			[]string{"fleet.secret: is required: nothing joins or connects to the fleet without it"}},
		{"short secret", "node = \"mac-a\"\nsecret = \"hunter2\"\n",
			[]string{"fleet.secret: must be at least 16 characters, got 7"}},
		{"no node", secret,
			[]string{"fleet.node: is required in a fleet"}},
		{"bad node", "node = \"mac.a\"\n" + secret,
			[]string{`fleet.node: must be 1 to 32 letters, digits, '-' or '_', starting with a letter or digit, such as "mac-a"; got "mac.a"`}},
		{"node too long", "node = \"" + strings.Repeat("a", 33) + "\"\n" + secret,
			[]string{"fleet.node: must be 1 to 32 letters"}},
		{"remote route without TLS", "node = \"mac-a\"\ncluster = \"127.0.0.1:6222\"\nroutes = [\"nats://127.0.0.1:6223\", \"nats://mac-b:6222\"]\n" + secret,
			[]string{`fleet.routes[1]: "nats://mac-b:6222" is not on this machine, and a route without TLS would carry the fleet's data and secret in clear: set fleet.tls_cert, fleet.tls_key and fleet.tls_ca`}},
		{"open cluster port without TLS", "node = \"mac-a\"\ncluster = \"0.0.0.0:6222\"\n" + secret,
			[]string{`fleet.cluster: "0.0.0.0:6222" accepts routes from the network without TLS`}},
		{"cluster on every interface without TLS", "node = \"mac-a\"\ncluster = \":6222\"\n" + secret,
			[]string{`fleet.cluster: ":6222" accepts routes from the network without TLS`}},
		{"part of the TLS files", "node = \"mac-a\"\n" + secret + "tls_cert = \"" + cert + "\"\n",
			[]string{"fleet.tls_key: is required with the other fleet.tls_* settings", "fleet.tls_ca: is required with the other fleet.tls_* settings"}},
		{"TLS files that do not load", "node = \"mac-a\"\n" + secret + "tls_cert = \"" + ca + "\"\ntls_key = \"" + key + "\"\ntls_ca = \"" + notPEM + "\"\n",
			[]string{"fleet.tls_cert: cannot load the certificate and key", "fleet.tls_ca: " + notPEM + " holds no PEM certificate"}},
		{"url with an embedded server's settings", "node = \"mac-a\"\nurl = \"nats://nats.internal:4222\"\nlisten = \"127.0.0.1:4223\"\ncluster = \"127.0.0.1:6222\"\nroutes = [\"nats://127.0.0.1:6223\"]\n" + secret,
			[]string{"fleet.url: connects to an existing NATS instead of starting one, so fleet.listen and fleet.cluster and fleet.routes would do nothing"}},
		{"bad url", "node = \"mac-a\"\nurl = \"http://nats.internal\"\n" + secret,
			[]string{`fleet.url: must be nats:// or tls:// URLs`}},
		{"listen off loopback", "node = \"mac-a\"\nlisten = \"0.0.0.0:4222\"\n" + secret,
			[]string{`fleet.listen: must be a loopback address such as "127.0.0.1:4222", got "0.0.0.0:4222"`}},
		{"routes without cluster", "node = \"mac-a\"\nroutes = [\"nats://127.0.0.1:6223\"]\n" + secret,
			[]string{"fleet.routes: need fleet.cluster"}},
		{"route with credentials", "node = \"mac-a\"\ncluster = \"127.0.0.1:6222\"\nroutes = [\"nats://u:p@127.0.0.1:6223\"]\n" + secret,
			[]string{`fleet.routes[0]: must not carry credentials: the routes authenticate with fleet.secret; write "nats://127.0.0.1:6223"`}},
		{"route not a URL", "node = \"mac-a\"\ncluster = \"127.0.0.1:6222\"\nroutes = [\"127.0.0.1:6223\"]\n" + secret,
			[]string{`fleet.routes[0]: must be a node's cluster address as nats://host:port`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, "[fleet]\n"+tt.doc+oneLine)
			_, err := config.Load(path)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), "config "+path+": "+w) {
					t.Errorf("error %q\ndoes not contain %q", err, w)
				}
			}
		})
	}
}

// fleetCert writes a CA and a node certificate signed by it, and returns
// the paths of the node's certificate, its key and the CA.
func fleetCert(t *testing.T) (cert, key, ca string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fleet CA"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	nodeKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "mac-a"}, DNSNames: []string{"mac-a"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, nodeKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(nodeKey)
	if err != nil {
		t.Fatal(err)
	}
	cert = writeFile(t, "node.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	key = writeFile(t, "node-key.pem", pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	ca = writeFile(t, "ca.pem", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	return cert, key, ca
}
