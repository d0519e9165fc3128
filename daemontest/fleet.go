package daemontest

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemon"
	"github.com/blueline-app/blueline/testkit"
)

// FleetSecret is the test fleets' shared secret.
const FleetSecret = "the-test-fleet-secret-0123456789"

// FleetNode is the name of node i of a test fleet: mac-a, mac-b, …
func FleetNode(i int) string { return "mac-" + string(rune('a'+i)) }

// FleetLine is the one line of node i of a test fleet, on the simulated
// network with advanced features: +15550001001 on mac-a, +15550002001 on
// mac-b, …
func FleetLine(i int) string { return fmt.Sprintf("+1555000%d001", i+1) }

// FleetConfig is the test configuration of node i of a fleet whose cluster
// ports are routes ("127.0.0.1:port", one per node): its own line
// (FleetLine), the sandbox on node 0 only, and [fleet] on loopback.
func FleetConfig(dataDir string, i int, routes []string, extra string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[server]\nlisten = \"127.0.0.1:0\"\n\n[storage]\ndir = %q\n\n", dataDir)
	if i == 0 {
		fmt.Fprintf(&b, "[sandbox]\nhandle = %q\ndaily_quota = 5\n\n", SandboxLine)
	}
	fmt.Fprintf(&b, "[[lines]]\nhandle = %q\nlabel = \"Line of %s\"\nadvanced_features = true\n\n", FleetLine(i), FleetNode(i))
	fmt.Fprintf(&b, "[delivery]\nmax_attempts = 3\nretry_base = \"5ms\"\nretry_max = \"20ms\"\n\n")
	urls := make([]string, len(routes))
	for j, r := range routes {
		urls[j] = fmt.Sprintf("%q", "nats://"+r)
	}
	fmt.Fprintf(&b, "[fleet]\nnode = %q\nlisten = \"127.0.0.1:0\"\ncluster = %q\nroutes = [%s]\nsecret = %q\n\n",
		FleetNode(i), routes[i], strings.Join(urls, ", "), FleetSecret)
	b.WriteString(extra)
	return b.String()
}

// Fleet starts n daemons as one fleet on loopback (n is 3 or more: a
// fleet of two cannot keep a majority), each with FleetConfig and extra
// appended. They start together, since each waits for the others to elect
// JetStream's leader. They are stopped when the test ends; Stop and Start
// one to take it away and bring it back with its data.
func Fleet(t testing.TB, n int, extra string) []*Daemon {
	t.Helper()
	routes := make([]string, n)
	for i := range routes {
		routes[i] = freeLoopbackAddr(t)
	}
	nodes := make([]*Daemon, n)
	for i := range nodes {
		dir := t.TempDir()
		td := &Daemon{t: t, cfgPath: filepath.Join(dir, "blueline.toml"), dataDir: filepath.Join(dir, "data")}
		if err := os.WriteFile(td.cfgPath, []byte(FleetConfig(td.dataDir, i, routes, extra)), 0o600); err != nil {
			t.Fatal(err)
		}
		td.admin = adminsock.NewClient(td.dataDir)
		t.Cleanup(td.Stop)
		nodes[i] = td
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, td := range nodes {
		cfg := LoadConfig(t, td.cfgPath)
		wg.Go(func() {
			d, err := daemon.Start(context.Background(), cfg, Log())
			if err != nil {
				errs[i] = fmt.Errorf("%s: %w", FleetNode(i), err)
				return
			}
			td.d, td.url = d, URL(d)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return nodes
}

// freeLoopbackAddr is a loopback address whose port was free a moment ago:
// a fleet's cluster ports must be known to every node before any listens.
func freeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// FleetKey creates an API key on nodes[0] (see Daemon.Key) and waits
// until every running node knows it (the fleet's control plane shares it
// through KV). It returns the secret.
func FleetKey(t testing.TB, nodes []*Daemon, req api.KeyRequest) string {
	t.Helper()
	secret := nodes[0].Key(req)
	for _, td := range nodes[1:] {
		if td.d == nil {
			continue
		}
		testkit.Eventually(t, 5*time.Second, func() bool {
			r, err := http.NewRequest(http.MethodGet, td.url+"/v1/webhooks", nil)
			if err != nil {
				t.Fatal(err)
			}
			r.Header.Set("Authorization", "Bearer "+secret)
			resp, err := http.DefaultClient.Do(r)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode != http.StatusUnauthorized
		})
	}
	return secret
}
