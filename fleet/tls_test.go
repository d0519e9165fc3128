package fleet

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/blueline-app/blueline/testkit"
)

// writePKI writes a CA and, for each name, a certificate for 127.0.0.1
// signed by it, good for serving and for client authentication. It returns
// the CA's file, and each name's certificate and key files.
func writePKI(t *testing.T, dir string, names ...string) (ca string, certs, keys map[string]string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "fleet test CA"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	ca = write("ca.pem", "CERTIFICATE", caDER)
	certs, keys = map[string]string{}, map[string]string{}
	for i, name := range names {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: name},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caTmpl, key.Public(), caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certs[name] = write(name+".pem", "CERTIFICATE", der)
		keys[name] = write(name+"-key.pem", "PRIVATE KEY", keyDER)
	}
	return ca, certs, keys
}

// Routes with mutual TLS: the cluster forms and works over them, and a
// node with the secret but without TLS cannot join.
func TestRouteTLS(t *testing.T) {
	dir := t.TempDir()
	ca, certs, keys := writePKI(t, dir, "a", "b", "c")
	c, err := startTestCluster(filepath.Join(dir, "nodes"), 3, func(i int, o *Options) {
		name := string(rune('a' + i))
		cfg, err := RouteTLSFromFiles(certs[name], keys[name], ca)
		if err != nil {
			t.Error(err)
		}
		o.RouteTLS = cfg
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	dumpOnFailure(t, c)
	for _, n := range c.nodes {
		v, err := n.Server().Varz(nil)
		if err != nil || !v.Cluster.TLSRequired || !v.Cluster.TLSVerify {
			t.Errorf("node %s's cluster: TLS required %v, verify %v (%v)", n.Name(), v.Cluster.TLSRequired, v.Cluster.TLSVerify, err)
		}
	}
	ctx := ctxFor(t, 10*time.Second)
	srv, err := c.node(1).Serve(func(ctx context.Context, req Request) Response {
		return Response{Status: http.StatusOK, Body: []byte("over TLS")}
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitInterest(t, c.node(0), "b")
	if resp, err := c.node(0).Forward(ctx, "b", Request{Method: "GET", Path: "/"}); err != nil || string(resp.Body) != "over TLS" {
		t.Errorf("forward over TLS routes: %q, %v", resp.Body, err)
	}

	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	buf := &testkit.LogBuffer{}
	n, err := Start(context.Background(), Options{
		Node: "plain", Secret: testSecret, Listen: "127.0.0.1:0", Cluster: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		Routes: c.opts[0].Routes, StoreDir: filepath.Join(dir, "plain"), StartTimeout: 1500 * time.Millisecond,
		EventsMaxBytes: 64 << 20, Logger: slog.New(slog.NewTextHandler(buf, nil)),
	})
	if err == nil {
		n.Close()
		t.Fatal("a node without TLS joined a TLS cluster")
	}
	if routes := c.node(0).Server().NumRoutes(); routes == 0 || strings.Contains(fmt.Sprint(routez(t, c.node(0).Server())), "plain") {
		t.Errorf("node a's routes: %v", routez(t, c.node(0).Server()))
	}
}

func routez(t *testing.T, s *server.Server) []string {
	t.Helper()
	rz, err := s.Routez(nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rz.Routes {
		names = append(names, r.RemoteName)
	}
	return names
}

// A node on an existing NATS (here the shared cluster's node a, through
// its client port): it provisions the same buckets, and forwards both ways.
func TestExistingNATS(t *testing.T) {
	c := sharedCluster(t)
	ctx := ctxFor(t, 10*time.Second)
	url := strings.Replace(c.node(0).ClientURL(), "nats://", "nats://"+ClientUser+":"+ClientPassword(testSecret)+"@", 1)
	buf := &testkit.LogBuffer{}
	d, err := Start(ctx, Options{Node: "d", Secret: testSecret, URL: url, EventsMaxBytes: 64 << 20,
		Logger: slog.New(slog.NewTextHandler(buf, nil))})
	if err != nil {
		t.Fatalf("%v\n%s", err, buf)
	}
	defer d.Close()
	if d.Replicas() != 3 || d.ClientURL() != "" || d.Server() != nil {
		t.Errorf("replicas %d, client URL %q; want 3, none", d.Replicas(), d.ClientURL())
	}
	keys, _ := Open[apiKey](d, BucketKeys)
	rev, err := keys.Put(ctx, "key_from_d", apiKey{Owner: "d"})
	if err != nil {
		t.Fatal(err)
	}
	fromC, _ := Open[apiKey](c.node(2), BucketKeys)
	testkit.Eventually(t, time.Second, func() bool {
		e, err := fromC.Get(ctx, "key_from_d")
		return err == nil && e.Revision == rev
	})
	srv, err := d.Serve(func(ctx context.Context, req Request) Response { return Response{Status: http.StatusAccepted} }, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitInterest(t, c.node(2), "d")
	if resp, err := c.node(2).Forward(ctx, "d", Request{Method: "POST", Path: "/"}); err != nil || resp.Status != http.StatusAccepted {
		t.Errorf("c → d: %d, %v", resp.Status, err)
	}
}

// Routes with the TLS of a certificate each node has for its name (as an
// ACME CA issues them): encrypted, the accepting node proving its name,
// the dialing one its secret; the cluster forms and works over them.
func TestRouteTLSFromCertificate(t *testing.T) {
	dir := t.TempDir()
	ca, certs, keys := writePKI(t, dir, "a", "b", "c")
	pem, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	c, err := startTestCluster(filepath.Join(dir, "nodes"), 3, func(i int, o *Options) {
		name := string(rune('a' + i))
		cert, err := tls.LoadX509KeyPair(certs[name], keys[name])
		if err != nil {
			t.Error(err)
		}
		o.RouteTLS = RouteTLSFromCertificate(func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return &cert, nil }, roots)
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	dumpOnFailure(t, c)
	for _, n := range c.nodes {
		v, err := n.Server().Varz(nil)
		if err != nil || !v.Cluster.TLSRequired {
			t.Errorf("node %s's cluster: TLS required %v (%v)", n.Name(), v.Cluster.TLSRequired, err)
		}
	}
	srv, err := c.node(2).Serve(func(ctx context.Context, req Request) Response {
		return Response{Status: http.StatusOK, Body: []byte("over TLS")}
	}, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitInterest(t, c.node(0), "c")
	if resp, err := c.node(0).Forward(ctxFor(t, 10*time.Second), "c", Request{Method: "GET", Path: "/"}); err != nil || string(resp.Body) != "over TLS" {
		t.Errorf("forward over TLS routes: %q, %v", resp.Body, err)
	}
}
