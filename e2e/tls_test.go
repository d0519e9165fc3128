package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"io/fs"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/letsencrypt/pebble/v2/ca"
	"github.com/letsencrypt/pebble/v2/db"
	"github.com/letsencrypt/pebble/v2/va"
	"github.com/letsencrypt/pebble/v2/wfe"
	"github.com/miekg/dns"

	"github.com/blueline-app/blueline/cli"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/daemon"
	"github.com/blueline-app/blueline/testkit"
)

// The TLS test runs a real ACME exchange on loopback: Pebble, Let's
// Encrypt's test CA, runs in the test process; a tiny DNS server tells its
// validation authority that the test domain is 127.0.0.1, where the
// daemon's HTTP server answers the HTTP-01 challenge for real.

// testDomain is a name under .test (reserved, never resolved for real) of
// its own for each run: certmagic keeps renewal jobs and their back-off per
// name for the whole process, and a renewal cut short by one run's shutdown
// must not hold up the next (go test -count).
func testDomain() string {
	return fmt.Sprintf("run%d.blueline.test", domainRuns.Add(1))
}

var domainRuns atomic.Int64

// pebble is an ACME CA on loopback.
type pebble struct {
	dirURL  string         // the ACME directory
	rootPEM string         // file: the root of its HTTPS endpoint, for trusted_roots
	roots   *x509.CertPool // the root of the certificates it issues
	log     *testkit.LogBuffer
}

// startPebble runs Pebble, validating HTTP-01 challenges on httpPort of the
// addresses dnsAddr resolves names to, and issuing certificates valid for
// validity.
func startPebble(t *testing.T, httpPort int, dnsAddr string, validity time.Duration) *pebble {
	t.Helper()
	t.Setenv("PEBBLE_VA_NOSLEEP", "1")     // no random waits before validating
	t.Setenv("PEBBLE_VA_ALWAYS_VALID", "") // validate for real
	t.Setenv("PEBBLE_WFE_NONCEREJECT", "0")
	t.Setenv("PEBBLE_AUTHZREUSE", "0") // a renewal is validated again
	p := &pebble{log: &testkit.LogBuffer{}}
	logger := log.New(p.log, "pebble ", log.Lmicroseconds)
	store := db.NewMemoryStore()
	authority := ca.New(logger, store, "", "ecdsa", 0, 1,
		map[string]ca.Profile{"default": {Description: "short-lived", ValidityPeriod: uint64(validity / time.Second)}})
	validator := va.New(logger, httpPort, 0, false, dnsAddr, store)
	front := wfe.New(logger, store, validator, authority, []string{"pebble.letsencrypt.org"}, false, false, 0, 0)
	srv := httptest.NewUnstartedServer(front.Handler())
	srv.Config.ErrorLog = logger
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.dirURL = srv.URL + wfe.DirectoryPath

	p.rootPEM = filepath.Join(t.TempDir(), "pebble-https-root.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(p.rootPEM, block, 0o600); err != nil {
		t.Fatal(err)
	}
	p.roots = x509.NewCertPool()
	p.roots.AddCert(authority.GetRootCert(0).Cert)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("Pebble's log:\n%s", p.log)
		}
	})
	return p
}

// tokens lists the challenge tokens Pebble fetched under prefix.
func (p *pebble) tokens(prefix string) []string {
	seen := map[string]bool{}
	var out []string
	for line := range strings.Lines(p.log.String()) {
		_, after, ok := strings.Cut(line, "Attempting to validate w/ HTTP: "+prefix)
		if token := strings.TrimSpace(after); ok && !seen[token] {
			seen[token] = true
			out = append(out, token)
		}
	}
	return out
}

// startDNS answers A queries for domain with 127.0.0.1 (and nothing else),
// over TCP as Pebble asks, and returns its address.
func startDNS(t *testing.T, domain string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{Listener: ln, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, qq := range q.Question {
			if qq.Qtype == dns.TypeA && strings.EqualFold(qq.Name, dns.Fqdn(domain)) {
				m.Answer = append(m.Answer, &dns.A{
					Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET},
					A:   net.IPv4(127, 0, 0, 1),
				})
			}
		}
		w.WriteMsg(m)
	})}
	go srv.ActivateAndServe()
	t.Cleanup(func() { srv.Shutdown() })
	return ln.Addr().String()
}

// The daemon obtains a certificate from an ACME CA through the HTTP-01
// challenge on its HTTP port, serves the API over HTTPS with it, redirects
// plain HTTP there, and renews the certificate in the background while it
// keeps serving.
func TestTLSWithACME(t *testing.T) {
	start := time.Now()
	httpAddr := freePort(t) // Pebble must know the challenge port before the daemon starts
	_, port, _ := net.SplitHostPort(httpAddr)
	httpPort, _ := strconv.Atoi(port)
	tlsDomain := testDomain()
	// Certificates live 6 s: with a third of their life left, or when the
	// CA's renewal information says so, the daemon renews them.
	p := startPebble(t, httpPort, startDNS(t, tlsDomain), 6*time.Second)

	td := newTestDaemon(t, fmt.Sprintf(`
[tls]
domains = [%q]
email = "admin@blueline.test"
ca = %q
http_listen = %q
https_listen = "127.0.0.1:0"
trusted_roots = %q
`, strings.ToUpper(tlsDomain), p.dirURL, httpAddr, p.rootPEM))
	cfg := td.config()
	cfg.TLS.RenewCheck = config.Duration{Duration: 100 * time.Millisecond}
	log, logs := keptLog()
	d, err := daemon.Start(context.Background(), cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			d.Shutdown(context.Background())
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", logs)
		}
	})
	httpsAddr := d.Addr().String()
	_, httpsPort, _ := net.SplitHostPort(httpsAddr)
	base := "https://" + net.JoinHostPort(tlsDomain, httpsPort)

	// A client that trusts only Pebble's root, and finds blueline.test on
	// loopback.
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		_, port, _ := net.SplitHostPort(addr)
		return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
	}
	client := &http.Client{
		Transport: &http.Transport{DialContext: dial, TLSClientConfig: &tls.Config{RootCAs: p.roots},
			ForceAttemptHTTP2: true, DisableKeepAlives: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		Timeout:       10 * time.Second,
	}
	// served is the certificate a new connection gets, verified against
	// Pebble's root for the domain; nil until there is one.
	served := func() *x509.Certificate {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", httpsAddr,
			&tls.Config{RootCAs: p.roots, ServerName: tlsDomain})
		if err != nil {
			return nil
		}
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}

	// 1. The certificate is obtained in the background, by a real HTTP-01
	// validation against the daemon's HTTP server.
	var first *x509.Certificate
	testkit.Eventually(t, 20*time.Second, func() bool { first = served(); return first != nil })
	obtained := time.Since(start)
	if len(first.DNSNames) != 1 || first.DNSNames[0] != tlsDomain {
		t.Errorf("certificate names %v, want [%s]", first.DNSNames, tlsDomain)
	}
	challengeURL := fmt.Sprintf("http://%s/.well-known/acme-challenge/", net.JoinHostPort(tlsDomain, port))
	if len(p.tokens(challengeURL)) == 0 {
		t.Errorf("Pebble did not validate through %s", challengeURL)
	}
	// certmagic logs through the daemon's slog logger.
	for _, want := range []string{`msg="served key authentication"`, `logger=certmagic`, `msg="certificate obtained successfully"`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("daemon log lacks %s", want)
		}
	}
	// It is kept under the data folder, where a restart finds it.
	var stored []string
	filepath.WalkDir(filepath.Join(td.dataDir, "certmagic"), func(path string, e fs.DirEntry, err error) error {
		if err == nil && e.Name() == tlsDomain+".crt" {
			stored = append(stored, path)
		}
		return nil
	})
	if len(stored) != 1 {
		t.Errorf("certificates stored under the data folder: %v, want one %s.crt", stored, tlsDomain)
	}

	// 2. The API over HTTPS (HTTP/2), with a key from the CLI.
	var keyOut, keyErr bytes.Buffer
	if code := cli.Run(context.Background(), cli.Build{}, []string{"keys", "create", "--label", "tls", "--owner", "t", "--config", td.cfgPath}, nil, &keyOut, &keyErr); code != 0 {
		t.Fatalf("keys create: %s", keyErr.String())
	}
	key := strings.TrimSpace(keyOut.String())
	do := func(method, url string, body io.Reader, header ...string) (*http.Response, []byte) {
		t.Helper()
		req, err := http.NewRequest(method, url, body)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, url, err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		return resp, raw
	}
	lines := func() string {
		t.Helper()
		resp, raw := do("GET", base+"/v1/lines", nil)
		var got struct{ Data []struct{ Handle string } }
		if resp.StatusCode != 200 || json.Unmarshal(raw, &got) != nil || len(got.Data) != 4 {
			t.Fatalf("GET /v1/lines over HTTPS: %d %s", resp.StatusCode, raw)
		}
		if resp.TLS == nil || len(resp.TLS.PeerCertificates) == 0 {
			t.Fatal("GET /v1/lines: not over TLS")
		}
		if resp.Proto != "HTTP/2.0" {
			t.Errorf("GET /v1/lines over %s, want HTTP/2.0", resp.Proto)
		}
		return resp.TLS.PeerCertificates[0].SerialNumber.String()
	}
	lines()

	// The public URL is https://<first domain>:<port>: file URLs use it.
	resp, raw := do("POST", base+"/v1/files", strings.NewReader("hello"), "Content-Type", "text/plain", "X-Filename", "a.txt")
	var file struct{ ID string }
	if resp.StatusCode != 201 || json.Unmarshal(raw, &file) != nil {
		t.Fatalf("upload: %d %s", resp.StatusCode, raw)
	}
	resp, _ = do("GET", base+"/v1/files?id="+file.ID, nil)
	if loc := resp.Header.Get("Location"); resp.StatusCode != 302 || !strings.HasPrefix(loc, base+"/files/"+file.ID+"?") {
		t.Errorf("GET /v1/files: %d Location %q, want a URL under %s/files/", resp.StatusCode, loc, base)
	} else if resp, body := do("GET", loc, nil); resp.StatusCode != 200 || string(body) != "hello" {
		t.Errorf("download over HTTPS: %d %q", resp.StatusCode, body)
	}

	// 3. Plain HTTP redirects to HTTPS, to one of the domains only, keeping
	// method, path and query; the challenge path does not redirect.
	plain := "http://" + net.JoinHostPort(tlsDomain, port)
	for _, tt := range []struct{ method, url, host, want string }{
		{"GET", plain + "/v1/lines?limit=1", "", base + "/v1/lines?limit=1"},
		{"POST", plain + "/v1/messages", "", base + "/v1/messages"},
		{"GET", plain + "/", "elsewhere.example", base + "/"},
	} {
		req, _ := http.NewRequest(tt.method, tt.url, nil)
		if tt.host != "" {
			req.Host = tt.host
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != tt.want {
			t.Errorf("%s %s (Host %q): %d Location %q, want 308 %s", tt.method, tt.url, tt.host, resp.StatusCode, resp.Header.Get("Location"), tt.want)
		}
	}
	if resp, _ := do("GET", plain+"/.well-known/acme-challenge/not-a-token", nil); resp.StatusCode != 404 {
		t.Errorf("unknown challenge token: %d, want 404", resp.StatusCode)
	}

	// 4. Renewal without a restart: the same server soon hands out a new
	// certificate, validated again through the challenge.
	var renewed *x509.Certificate
	testkit.Eventually(t, 20*time.Second, func() bool {
		renewed = served()
		return renewed != nil && renewed.SerialNumber.Cmp(first.SerialNumber) != 0
	})
	if got := lines(); got == first.SerialNumber.String() {
		t.Errorf("after renewal the API still serves serial %s", got)
	}
	if len(renewed.DNSNames) != 1 || renewed.DNSNames[0] != tlsDomain || renewed.NotAfter.Before(first.NotAfter) {
		t.Errorf("renewed certificate for %v until %s; first until %s", renewed.DNSNames, renewed.NotAfter, first.NotAfter)
	}
	if !strings.Contains(logs.String(), `msg="certificate renewed successfully"`) {
		t.Error(`daemon log lacks "certificate renewed successfully"`)
	}
	if tokens := p.tokens(challengeURL); len(tokens) < 2 {
		t.Errorf("Pebble validated challenges %v: the renewal's was not among them", tokens)
	}

	// 5. Shutdown is clean and closes both ports.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	stopped = true
	for _, addr := range []string{httpsAddr, httpAddr} {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after shutdown", addr)
		}
	}
	t.Logf("certificate obtained after %s, renewed after %s", obtained.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// With the CA out of reach, certmagic retries in the background (a minute,
// then longer), holding its storage lock: shutdown must end that at once and
// leave no lock behind.
func TestTLSShutdownWhileObtaining(t *testing.T) {
	gone := freePort(t) // nothing listens there
	td := newTestDaemon(t, fmt.Sprintf(`
[tls]
domains = [%q]
ca = "https://%s/dir"
http_listen = "127.0.0.1:0"
https_listen = "127.0.0.1:0"
`, testDomain(), gone))
	logs := &testkit.LogBuffer{}
	d, err := daemon.Start(context.Background(), td.config(), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), `msg="will retry"`) })

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	began := time.Now()
	if err := d.Shutdown(ctx); err != nil {
		t.Errorf("shutdown: %v", err)
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("shutdown took %s", took)
	}
	locks, _ := filepath.Glob(filepath.Join(td.dataDir, "certmagic", "locks", "*"))
	if len(locks) > 0 {
		t.Errorf("locks left behind: %v", locks)
	}
	if t.Failed() {
		t.Logf("daemon log:\n%s", logs)
	}
}
