package e2e

import (
	"bufio"
	"context"
	"errors"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/cli"
	"github.com/blueline-app/blueline/testkit"
)

// The admin socket's trust, end to end: its fallback folder under the
// temporary directory has a name anyone can work out, so the daemon and the
// CLI both check that it is the daemon's own (server/adminsock_test.go
// covers the details, and a real process of another user).

// longDataConfig writes a configuration whose data folder's path is too long
// for a socket: its admin socket goes to the fallback folder.
func longDataConfig(t *testing.T) (cfgPath, dataDir string) {
	t.Helper()
	dir := t.TempDir()
	dataDir = filepath.Join(dir, strings.Repeat("deep-folder-", 10))
	cfgPath = filepath.Join(dir, "blueline.toml")
	writeFile(t, cfgPath, testConfig(dataDir, ""))
	if sock := adminsock.Path(dataDir); strings.HasPrefix(sock, dataDir) {
		t.Fatalf("%s is not in the fallback folder", sock)
	}
	return cfgPath, dataDir
}

// plantFolder makes the fallback folder as someone else would: another
// user's when the tests run as root, else ours with a wider mode. It returns
// what is wrong with it, as a refusal (or warning) says.
func plantFolder(t *testing.T, folder string) string {
	t.Helper()
	if err := os.Mkdir(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		if err := os.Chmod(folder, 0o755); err != nil {
			t.Fatal(err)
		}
		return "has mode 0755, not 0700"
	}
	if err := os.Chmod(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(folder, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	return "belongs to uid 65534"
}

// A planted folder does not keep the daemon from starting, which would let
// any local user stop the service: `serve` leaves the folder alone, listens
// in a folder of its own and says where, and the CLI reaches it there.
func TestDaemonStartsDespitePlantedSocketFolder(t *testing.T) {
	testkit.SharedTempDir(t)
	cfgPath, dataDir := longDataConfig(t)
	sock := adminsock.Path(dataDir)
	folder := filepath.Dir(sock)
	want := plantFolder(t, folder)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs testkit.LogBuffer
	exited := make(chan int, 1)
	go func() {
		exited <- cli.Run(ctx, cli.Build{}, []string{"serve", "--config", cfgPath}, nil, io.Discard, &logs)
	}()
	testkit.Eventually(t, 30*time.Second, func() bool { return len(exited) > 0 || strings.Contains(logs.String(), "blueline serving") })
	select {
	case code := <-exited:
		t.Fatalf("serve with a planted socket folder exited %d:\n%s", code, logs.String())
	default:
	}
	moved := adminsock.Path(dataDir)
	if moved == sock || !strings.HasPrefix(moved, folder+"-") {
		t.Fatalf("the CLI looks for the socket at %s", moved)
	}
	for _, s := range []string{"level=WARN", folder, want, "admin_socket=" + moved, "rm -r " + folder} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("serve logged %q, which lacks %q", logs.String(), s)
		}
	}
	if out, errOut, code := runCLI("keys", "create", "--label", "moved", "--config", cfgPath); code != 0 || !strings.HasPrefix(out, "sk_live_") {
		t.Fatalf("keys create with the socket moved: exit %d %q %q", code, out, errOut)
	}
	if _, err := os.Lstat(sock); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a socket was made in the planted folder: %v", err)
	}
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("serve exited %d\n%s", code, logs.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}

	// Without it, the daemon makes its own folder and the CLI reaches it.
	if err := os.RemoveAll(folder); err != nil {
		t.Fatal(err)
	}
	td := &testDaemon{t: t, cfgPath: cfgPath, dataDir: dataDir}
	td.start()
	t.Cleanup(td.stop)
	if key := td.key(); !strings.HasPrefix(key, "sk_live_") {
		t.Fatalf("keys create printed %q", key)
	}
	fi, err := os.Lstat(folder)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || fi.Sys().(*syscall.Stat_t).Uid != uint32(os.Geteuid()) {
		t.Errorf("the daemon's folder %s: %v %v", folder, fi.Mode(), err)
	}
}

// A CLI command against a socket in a planted folder sends it nothing and
// says why.
func TestCLIRefusesPlantedSocket(t *testing.T) {
	testkit.SharedTempDir(t)
	cfgPath, dataDir := longDataConfig(t)
	sock := adminsock.Path(dataDir)
	folder := filepath.Dir(sock)
	if err := os.Mkdir(folder, 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	firstLines := make(chan string, 8)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			firstLines <- strings.TrimSpace(line)
		}
	}()
	want := "has mode 0755, not 0700"
	if err := os.Chmod(folder, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		want = "belongs to uid 65534"
		if err := os.Chmod(folder, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(folder, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}

	for _, args := range [][]string{
		{"keys", "create", "--label", "intercepted", "--config", cfgPath},
		{"keys", "revoke", "key_123", "--config", cfgPath},
	} {
		out, errOut, code := runCLI(args...)
		if code != 1 || out != "" {
			t.Errorf("%v: exit %d, stdout %q", args, code, out)
		}
		for _, s := range []string{"blueline: refusing the admin socket " + sock, want, "nothing was sent"} {
			if !strings.Contains(errOut, s) {
				t.Errorf("%v said %q, which lacks %q", args, errOut, s)
			}
		}
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(c, "probe\n")
	c.Close()
	select {
	case line := <-firstLines:
		if line != "probe" {
			t.Errorf("the planted socket got %q from the CLI", line)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the probe never arrived")
	}
}
