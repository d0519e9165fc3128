package cli

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/testkit"
)

// startServe runs `blueline serve args…` in this process until the test
// ends, and waits until it serves; it returns what the daemon logged.
func startServe(t *testing.T, args ...string) *testkit.LogBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var log testkit.LogBuffer
	done := make(chan int, 1)
	go func() {
		e := env{getenv: os.Getenv, installedConfig: func() string { return "" }}
		done <- run(ctx, Build{}, append([]string{"serve"}, args...), nil, io.Discard, &log, e)
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("serve exited %d:\n%s", code, log.String())
		}
	})
	testkit.Eventually(t, 20*time.Second, func() bool {
		select {
		case code := <-done:
			done <- code
			t.Fatalf("serve exited %d at start:\n%s", code, log.String())
		default:
		}
		return strings.Contains(log.String(), "blueline serving")
	})
	return &log
}

var servingListen = regexp.MustCompile(`msg="blueline serving" .*listen=(\S+)`)

// consolePage is the console's sign-in page of the daemon that logged
// log.
func consolePage(t *testing.T, log *testkit.LogBuffer) string {
	t.Helper()
	m := servingListen.FindStringSubmatch(log.String())
	if m == nil {
		t.Fatalf("no listen address in the start log:\n%s", log.String())
	}
	resp, err := http.Get("http://" + m[1] + "/dashboard/login")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-in page: %d %s", resp.StatusCode, b)
	}
	return string(b)
}

// serveFlagsConfig is a file that only moves the daemon elsewhere: it has
// no lines, so it serves the default's.
func serveFlagsConfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blueline.toml")
	doc := "[server]\nlisten = \"127.0.0.1:1\"\n[storage]\ndir = \"" + filepath.Join(t.TempDir(), "file-data") + "\"\n"
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// --listen and --data beat $BLUELINE_LISTEN and $BLUELINE_DATA, which beat
// the file, which beats the embedded default.
func TestServeFlagsOverEnvOverFile(t *testing.T) {
	path := serveFlagsConfig(t)
	file, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	a := &app{env: osEnv()}
	load := func(listen, data string) *config.Config {
		t.Helper()
		cfg, err := loadConfig(path, a.overrides(listen, data, false))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	t.Setenv(envListen, "")
	t.Setenv(envData, "")
	if c := load("", ""); c.Server.Listen != "127.0.0.1:1" || c.DataDir() != file.DataDir() {
		t.Errorf("file alone: %s %s", c.Server.Listen, c.DataDir())
	}
	t.Setenv(envListen, "127.0.0.1:2")
	t.Setenv(envData, "/env-data")
	if c := load("", ""); c.Server.Listen != "127.0.0.1:2" || c.DataDir() != "/env-data" {
		t.Errorf("environment over the file: %s %s", c.Server.Listen, c.DataDir())
	}
	if c := load("127.0.0.1:3", "/flag-data"); c.Server.Listen != "127.0.0.1:3" || c.DataDir() != "/flag-data" {
		t.Errorf("flags over the environment: %s %s", c.Server.Listen, c.DataDir())
	}
	if cfg, err := loadConfig("", a.overrides("", "", false)); err != nil || cfg.Server.Listen != "127.0.0.1:2" || cfg.DataDir() != "/env-data" {
		t.Errorf("environment over the embedded default: %v %v", cfg, err)
	}

	t.Setenv(envListen, "8080")
	if _, err := loadConfig(path, a.overrides("", "", false)); err == nil || !strings.Contains(err.Error(), envListen+": must be host:port") {
		t.Errorf("a bad $%s: %v", envListen, err)
	}
	if _, err := loadConfig(path, a.overrides("localhost", "", false)); err == nil || !strings.Contains(err.Error(), "--listen: must be host:port") {
		t.Errorf("a bad --listen: %v", err)
	}

	out, _, code := runCLI(t, "", "serve", "--help")
	for _, want := range []string{"--listen string", "--data string", "--dev", envListen, envData} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("serve --help (exit %d) does not list %s:\n%s", code, want, out)
		}
	}
}

// `serve --dev` lets a webhook post to a receiver on loopback over plain
// HTTP, says so in its log, and the event arrives signed; without --dev the
// same URL is refused. A daemon on a file without lines serves the
// default's simulated ones, and says so.
func TestServeDevDeliversToLoopback(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	t.Setenv("BLUELINE_CONFIG", serveFlagsConfig(t))
	t.Setenv(envListen, "")
	t.Setenv(envData, filepath.Join(t.TempDir(), "data"))
	got := make(chan *http.Request, 4)
	bodies := make(chan []byte, 4)
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- r
		bodies <- b
	}))
	defer rc.Close()
	const line = "+15550000001" // the embedded default's
	create := []string{"webhooks", "create", "--url", rc.URL + "/hook", "--event", "message.received", "--line", line, "--json"}

	t.Run("without --dev", func(t *testing.T) {
		log := startServe(t, "--listen", "127.0.0.1:0")
		if !strings.Contains(log.String(), "serving the embedded default's simulated lines") || strings.Contains(log.String(), "DEVELOPMENT MODE") {
			t.Errorf("start log:\n%s", log.String())
		}
		_, errOut, code := runCLI(t, "", create...)
		if code != 1 || !strings.Contains(errOut, "https://") || !strings.Contains(errOut, "serve --dev") {
			t.Errorf("a loopback http:// webhook without --dev: exit %d, %q", code, errOut)
		}
		if page := consolePage(t, log); strings.Contains(page, "Development mode") {
			t.Errorf("the console shows the --dev banner without --dev:\n%s", page)
		}
	})

	t.Run("with --dev", func(t *testing.T) {
		log := startServe(t, "--dev", "--listen", "127.0.0.1:0")
		if !strings.Contains(log.String(), "level=WARN msg=\"DEVELOPMENT MODE (--dev)") {
			t.Errorf("no warning in the start log:\n%s", log.String())
		}
		if page := consolePage(t, log); !strings.Contains(page, `<p class="dev-banner" role="note">Development mode`) {
			t.Errorf("the console shows no --dev banner:\n%s", page)
		}
		out, errOut, code := runCLI(t, "", create...)
		if code != 0 {
			t.Fatalf("webhooks create: exit %d, %q", code, errOut)
		}
		var hook struct{ Secret string }
		decodeJSON(t, "webhooks create", out, &hook)
		if _, errOut, code := runCLI(t, "", "sim", "inbound", "--line", line, "--from", "+15551234567", "--text", "hi"); code != 0 {
			t.Fatalf("sim inbound: exit %d, %q", code, errOut)
		}
		var r *http.Request
		select {
		case r = <-got:
		case <-time.After(20 * time.Second):
			t.Fatal("no delivery reached the loopback receiver")
		}
		body := <-bodies
		ev, err := client.VerifyWebhook(hook.Secret, r.Header, body, 0, time.Now())
		if err != nil || ev.Type != "message.received" {
			t.Errorf("delivery %s: %v", body, err)
		}
		var msg struct{ Text string }
		if err := json.Unmarshal(ev.Data, &msg); err != nil || msg.Text != "hi" {
			t.Errorf("delivered data %s: %v", ev.Data, err)
		}
	})
}

// --dev is refused with a listen address other machines reach, and with
// TLS.
func TestServeDevRefusedInPublic(t *testing.T) {
	t.Setenv("BLUELINE_CONFIG", "")
	t.Setenv(envListen, "")
	t.Setenv(envData, filepath.Join(t.TempDir(), "data"))
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:8080"} {
		_, errOut, code := runCLI(t, "", "serve", "--dev", "--listen", addr)
		if code != 1 || !strings.Contains(errOut, "--dev: is for a daemon on this machine alone") || !strings.Contains(errOut, addr) {
			t.Errorf("serve --dev --listen %s: exit %d, %q", addr, code, errOut)
		}
	}
	path := filepath.Join(t.TempDir(), "tls.toml")
	if err := os.WriteFile(path, []byte("[tls]\ndomains = [\"blueline.example.com\"]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, "", "serve", "--dev", "--config", path)
	if code != 1 || !strings.Contains(errOut, "--dev: is for a daemon on this machine alone") || !strings.Contains(errOut, "TLS") {
		t.Errorf("serve --dev with [tls]: exit %d, %q", code, errOut)
	}
}

// A port in use tells to change what set it: --listen, or
// $BLUELINE_LISTEN.
func TestServeListenInUseNamesItsSetting(t *testing.T) {
	t.Setenv("BLUELINE_CONFIG", "")
	t.Setenv(envData, filepath.Join(t.TempDir(), "data"))
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	t.Setenv(envListen, addr)
	if _, errOut, code := runCLI(t, "", "serve"); code != 1 || !strings.Contains(errOut, "set "+envListen+" to another port") {
		t.Errorf("serve with $%s in use: exit %d, %q", envListen, code, errOut)
	}
	t.Setenv(envListen, "")
	if _, errOut, code := runCLI(t, "", "serve", "--listen", addr); code != 1 || !strings.Contains(errOut, "set --listen to another port") {
		t.Errorf("serve --listen in use: exit %d, %q", code, errOut)
	}
}
