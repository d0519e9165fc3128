package e2e

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// The command line is checked before anything touches the system.
func TestServiceCommandLine(t *testing.T) {
	dir := t.TempDir()
	relative := filepath.Join(dir, "relative.toml")
	writeFile(t, relative, "[storage]\ndir = \"./data\"\n[sandbox]\nhandle = \"+15550000000\"\n")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"install"}, 2, "install needs --config FILE"},
		{[]string{"install", "--config", relative, "extra"}, 2, `takes no argument "extra"`},
		{[]string{"start", "--config", relative}, 2, "start takes no --config"},
		{[]string{"status", "now"}, 2, `takes no argument "now"`},
		{[]string{"install", "--config", filepath.Join(dir, "missing.toml")}, 1, "missing.toml"},
		{[]string{"install", "--config", relative}, 1, `storage.dir "./data" is relative`},
	} {
		_, errOut, code := runCLI(c.args...)
		if code != c.code || !strings.Contains(errOut, c.want) {
			t.Errorf("blueline %s: exit %d, %q; want exit %d and %q", strings.Join(c.args, " "), code, errOut, c.code, c.want)
		}
	}
	// Without systemd, the service commands say so (this is Linux's answer
	// where systemd is not PID 1, as in most containers).
	if runtime.GOOS == "linux" && !systemdRunning() {
		_, errOut, code := runCLI("status")
		if code != 1 || !strings.Contains(errOut, "systemd is not running") {
			t.Errorf("status without systemd: exit %d, %q", code, errOut)
		}
	}
}

func systemdRunning() bool {
	_, err := os.Stat("/run/systemd/system")
	return err == nil
}

// SIGTERM, as systemd and launchd stop the service: the request in flight
// finishes, the delivery worker stops mid-send, and the process exits within
// seconds, leaving the database free to open.
func TestServeStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	td, writeConfig := processTestDaemon(t)
	// Every send hangs for an hour: a worker is busy when the signal comes.
	writeConfig("[sim]\nlatency = \"1h\"\n")
	cmd := exec.Command(bin, "serve", "--config", td.cfgPath)
	var logs bytes.Buffer
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var exitErr error
	exited := make(chan struct{})
	go func() { exitErr = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { cmd.Process.Kill(); <-exited })
	testkit.Eventually(t, 20*time.Second, func() bool {
		_, _, code := td.cli("keys", "list")
		return code == 0
	})
	key := td.key()
	td.inbound(mainLine, alice, "hi")
	sent := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "stuck"})["id"].(string)
	testkit.Eventually(t, 10*time.Second, func() bool {
		return td.call("GET", "/v1/outbox?id="+sent, key, nil).Body["status"] == "claimed"
	})

	// An upload in flight: half of its body is sent before the signal.
	body, w := io.Pipe()
	req, err := http.NewRequest("POST", td.base+"/v1/files", body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "text/plain")
	req.ContentLength = 10
	answered := make(chan *http.Response, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Errorf("upload: %v", err)
			close(answered)
			return
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		answered <- resp
	}()
	if _, err := w.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	// The handler is streaming the body once its temp file exists.
	testkit.Eventually(t, 10*time.Second, func() bool {
		tmp, _ := filepath.Glob(filepath.Join(td.dataDir, "files", ".upload-*"))
		return len(tmp) == 1
	})

	signalled := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Shutdown has begun once the API stops taking connections; the
	// process must still be there, finishing the upload.
	testkit.Eventually(t, 10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(td.base, "http://"), time.Second)
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case <-exited:
		t.Fatalf("the daemon exited (%v) with a request in flight:\n%s", exitErr, logs.String())
	default:
	}
	if _, err := w.Write([]byte("world")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if resp := <-answered; resp == nil || resp.StatusCode != http.StatusCreated {
		t.Errorf("the upload in flight was not completed: %v", resp)
	}
	select {
	case <-exited:
		if exitErr != nil {
			t.Fatalf("exit: %v\n%s", exitErr, logs.String())
		}
	case <-time.After(8 * time.Second):
		t.Fatalf("still running 8 s after SIGTERM:\n%s", logs.String())
	}
	took := time.Since(signalled)
	t.Logf("exited %s after SIGTERM", took.Round(time.Millisecond))
	if took > 5*time.Second {
		t.Errorf("exit took %s after SIGTERM", took)
	}
	if strings.Contains(logs.String(), "did not stop in time") || !strings.Contains(logs.String(), "shutting down") {
		t.Errorf("shutdown logs:\n%s", logs.String())
	}
	// The lock is released: the database opens at once.
	db, err := storage.Open(td.dataDir)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer db.Close()
	if keys, err := db.Keys(context.Background()); err != nil || len(keys) != 1 {
		t.Fatalf("after the restart: %d keys, %v", len(keys), err)
	}
}
