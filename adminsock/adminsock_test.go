package adminsock

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blueline-app/blueline/testkit"
)

// nobody is the other user of these tests (they need root to use it).
const nobody = 65534

// testGuard bounds every wait in these tests; it is a failure, never
// synchronisation.
const testGuard = 10 * time.Second

// quiet is the log of daemons whose log these tests do not read.
var quiet = slog.New(slog.DiscardHandler)

// longDataDir is a data folder whose admin socket goes to the fallback
// folder.
func longDataDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), strings.Repeat("deep-folder-", 10))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if _, fallback := adminSocket(dir); !fallback {
		t.Fatalf("%s: no fallback", dir)
	}
	return dir
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give a file to another user")
	}
}

func mustNotExist(t *testing.T, path string) {
	t.Helper()
	if _, err := os.Lstat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s exists (%v)", path, err)
	}
}

func TestListenAdminFallbackFolder(t *testing.T) {
	tmp := testkit.SharedTempDir(t)
	dir := longDataDir(t)
	sock := Path(dir)
	folder := filepath.Dir(sock)
	if filepath.Dir(folder) != tmp || len(sock) > maxSocketPath {
		t.Fatalf("socket %s, want a short path in %s", sock, tmp)
	}
	l, err := Listen(dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Lstat(folder)
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || fileOwner(fi) != os.Geteuid() {
		t.Errorf("folder %s: %v %v", folder, fi.Mode(), err)
	}
	fi, err = os.Lstat(sock)
	if err != nil || fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket %s: %v %v", sock, fi.Mode(), err)
	}
	if _, err := Listen(dir, quiet); err == nil || !strings.Contains(err.Error(), "another daemon is already serving") {
		t.Errorf("second daemon: %v", err)
	}
	l.Close()
	// The next start takes the folder this one left.
	l, err = Listen(dir, quiet)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	l.Close()
}

// A fallback folder someone made before the daemon: the daemon leaves it
// alone, listens in a folder of a random name of its own, which the CLI
// finds (AdminSocketPath), and logs why and where. A restart keeps that
// folder; once the planted one is gone, the socket is back in its usual
// folder.
func TestListenAdminMovesFromPlantedFolder(t *testing.T) {
	for _, tt := range []struct {
		name  string
		plant func(t *testing.T, folder string) (inside string) // where a socket must not appear
		want  string
		root  bool
	}{
		{"wider mode", func(t *testing.T, folder string) string {
			mkdir(t, folder, 0o755)
			return folder
		}, "has mode 0755, not 0700", false},
		{"group bits", func(t *testing.T, folder string) string {
			mkdir(t, folder, 0o710)
			return folder
		}, "has mode 0710, not 0700", false},
		{"symbolic link", func(t *testing.T, folder string) string {
			target := filepath.Join(t.TempDir(), "elsewhere")
			mkdir(t, target, 0o700)
			if err := os.Symlink(target, folder); err != nil {
				t.Fatal(err)
			}
			return target
		}, "is a symbolic link", false},
		{"a file", func(t *testing.T, folder string) string {
			if err := os.WriteFile(folder, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			return ""
		}, "is not a folder", false},
		{"another user's", func(t *testing.T, folder string) string {
			mkdir(t, folder, 0o700)
			chown(t, folder, nobody)
			return folder
		}, fmt.Sprintf("belongs to uid %d", nobody), true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				needRoot(t)
			}
			tmp := testkit.SharedTempDir(t)
			dir := longDataDir(t)
			usual := Path(dir)
			folder := filepath.Dir(usual)
			inside := tt.plant(t, folder)
			var logs testkit.LogBuffer
			l, err := Listen(dir, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatalf("the daemon did not start: %v", err)
			}
			sock := Path(dir)
			moved := filepath.Dir(sock)
			if sock == usual || filepath.Dir(moved) != tmp || !strings.HasPrefix(moved, folder+"-") || len(sock) > maxSocketPath {
				t.Fatalf("the CLI looks for the socket at %s", sock)
			}
			if fi, err := os.Lstat(moved); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 || fileOwner(fi) != os.Geteuid() {
				t.Errorf("folder %s: %v", moved, err)
			}
			if err := checkAdminSocket(sock, true, trustedUIDs(dir)); err != nil {
				t.Errorf("the CLI refuses the moved socket: %v", err)
			}
			if c, err := net.Dial("unix", sock); err != nil {
				t.Errorf("nothing listens at %s: %v", sock, err)
			} else {
				c.Close()
			}
			for _, want := range []string{"level=WARN", folder, tt.want, "admin_socket=" + sock, "rm -r " + folder} {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("log %q lacks %q", logs.String(), want)
				}
			}
			if inside != "" {
				mustNotExist(t, filepath.Join(inside, "admin.sock"))
			}

			l.Close()
			if l, err = Listen(dir, quiet); err != nil {
				t.Fatalf("restart: %v", err)
			}
			if again := Path(dir); again != sock {
				t.Errorf("after a restart the socket is at %s, not %s", again, sock)
			}
			l.Close()

			if err := os.RemoveAll(folder); err != nil {
				t.Fatal(err)
			}
			if l, err = Listen(dir, quiet); err != nil {
				t.Fatalf("start without the planted folder: %v", err)
			}
			defer l.Close()
			if back := Path(dir); back != usual {
				t.Errorf("without the planted folder the socket is at %s, not %s", back, usual)
			}
			mustNotExist(t, filepath.Join(dir, movedSocketNote))
		})
	}
}

func TestListenAdminChecksDataFolder(t *testing.T) {
	for _, tt := range []struct {
		name string
		mode fs.FileMode
		uid  int // -1: ours
		want string
	}{
		{"0700", 0o700, -1, ""},
		{"0750, as the .deb makes it", 0o750, -1, ""},
		{"group-writable", 0o770, -1, "writable by its group or others (mode 0770)"},
		{"world-writable", 0o777, -1, "writable by its group or others (mode 0777)"},
		{"another user's", 0o700, nobody, fmt.Sprintf("belongs to uid %d", nobody)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.uid >= 0 {
				needRoot(t)
			}
			dir := filepath.Join(t.TempDir(), "data")
			mkdir(t, dir, tt.mode)
			if tt.uid >= 0 {
				chown(t, dir, tt.uid)
			}
			l, err := Listen(dir, quiet)
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				l.Close()
				return
			}
			if err == nil {
				l.Close()
				t.Fatal("accepted")
			}
			for _, want := range []string{"refusing to start", dir, tt.want} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			mustNotExist(t, filepath.Join(dir, "admin.sock"))
		})
	}
}

// Under systemd's PrivateTmp nobody else would see the fallback folder: the
// daemon says so instead of listening where the CLI cannot reach.
func TestListenAdminUnderPrivateTmp(t *testing.T) {
	testkit.SharedTempDir(t)
	dir := longDataDir(t)
	l, err := listenAdmin(dir, func(string) bool { return true }, quiet)
	if err == nil {
		l.Close()
		t.Fatal("listened in a private temporary directory")
	}
	for _, want := range []string{dir, "PrivateTmp", "shorter path"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	mustNotExist(t, filepath.Dir(Path(dir)))
}

func TestPrivateMount(t *testing.T) {
	const mountinfo = `22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
25 22 0:21 / /tmp rw,nosuid,nodev shared:5 - tmpfs tmpfs rw
300 22 8:1 /tmp/systemd-private-0f1e2d-blueline.service-AbCdEf/tmp /var/tmp rw,relatime shared:1 - ext4 /dev/sda1 rw
301 25 0:21 /systemd-private-0f1e2d-blueline.service-XyZ/tmp /tmp rw,nosuid,nodev shared:5 - tmpfs tmpfs rw
302 22 0:50 / /srv/with\040space rw - tmpfs tmpfs rw
303 302 0:51 /systemd-private-x/tmp /srv/with\040space/in rw - tmpfs tmpfs rw
`
	for dir, want := range map[string]bool{
		"/tmp":                   true, // the private mount is on top of the shared one
		"/tmp/sub":               true,
		"/var/tmp":               true,
		"/var/lib/blueline":      false,
		"/tmpfoo":                false,
		"/srv/with space":        false,
		"/srv/with space/in/x":   true,
		"/srv/with\\040space/in": false,
	} {
		if got := privateMount(strings.NewReader(mountinfo), dir); got != want {
			t.Errorf("privateMount(%q) = %v, want %v", dir, got, want)
		}
	}
	if privateMount(strings.NewReader("25 1 0:21 / /tmp rw - tmpfs tmpfs rw\n"), "/tmp") {
		t.Error("an ordinary /tmp is private")
	}
}

// recordingDaemon stands in for the daemon on a Unix socket: it reports the
// first line of each connection, in turn, or "eof" for one that ended
// before sending a line; a GET gets an answer.
type recordingDaemon struct {
	ln    net.Listener
	lines chan string
}

func listenRecording(t *testing.T, path string) *recordingDaemon {
	t.Helper()
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	d := &recordingDaemon{ln: ln, lines: make(chan string, 16)}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d.lines <- serveRecorded(c)
		}
	}()
	return d
}

// serveRecorded reads a connection's first line, answers a GET with
// {"ok": true}, and says what it read.
func serveRecorded(c net.Conn) string {
	defer c.Close()
	c.SetDeadline(time.Now().Add(testGuard))
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		if line == "" && errors.Is(err, io.EOF) {
			return "eof"
		}
		return "error: " + err.Error()
	}
	line = strings.TrimSpace(line)
	if strings.HasPrefix(line, "GET ") {
		for {
			h, err := r.ReadString('\n')
			if err != nil || h == "\r\n" {
				break
			}
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\nConnection: close\r\n\r\n{\"ok\":true}")
	}
	return line
}

// next is the next connection's first line.
func (d *recordingDaemon) next(t *testing.T) string {
	t.Helper()
	select {
	case line := <-d.lines:
		return line
	case <-time.After(testGuard):
		t.Fatal("no connection")
	}
	return ""
}

// probe connects without any check and sends "probe": the next line the
// daemon reports is "probe" when nothing connected before.
func probe(t *testing.T, path string) {
	t.Helper()
	c, err := net.DialTimeout("unix", path, testGuard)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	io.WriteString(c, "probe\n")
}

// The CLI sends nothing to a socket it cannot trust, and says why.
func TestDialRefusesUntrustedSocket(t *testing.T) {
	ours := func(string) []int { return []int{os.Geteuid()} }
	for _, tt := range []struct {
		name     string
		fallback bool
		trust    func(string) []int
		setup    func(t *testing.T, dir, sock string)
		want     string // "" when the request goes through
		root     bool
	}{
		{name: "the daemon's", trust: ours},
		{name: "the daemon's, in the fallback folder", fallback: true, trust: ours},
		{name: "a user not trusted", trust: func(string) []int { return []int{4242} },
			want: fmt.Sprintf("belongs to uid %d", os.Geteuid())},
		{name: "socket writable by others", trust: ours, setup: func(t *testing.T, _, sock string) {
			if err := os.Chmod(sock, 0o666); err != nil {
				t.Fatal(err)
			}
		}, want: "it is writable by its group or others (mode 0666)"},
		{name: "data folder writable by others", trust: ours, setup: func(t *testing.T, dir, _ string) {
			if err := os.Chmod(dir, 0o777); err != nil {
				t.Fatal(err)
			}
		}, want: "is writable by its group or others (mode 0777)"},
		{name: "fallback folder of a wider mode", fallback: true, trust: ours, setup: func(t *testing.T, _, sock string) {
			if err := os.Chmod(filepath.Dir(sock), 0o755); err != nil {
				t.Fatal(err)
			}
		}, want: "has mode 0755, not 0700"},
		{name: "fallback folder of another user", fallback: true, trust: trustedUIDs, root: true, setup: func(t *testing.T, _, sock string) {
			chown(t, filepath.Dir(sock), nobody)
		}, want: fmt.Sprintf("belongs to uid %d", nobody)},
		{name: "socket of another user", trust: trustedUIDs, root: true, setup: func(t *testing.T, _, sock string) {
			chown(t, sock, nobody)
		}, want: fmt.Sprintf("it belongs to uid %d", nobody)},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.root {
				needRoot(t)
			}
			dir := filepath.Join(testkit.SharedTempDir(t), "data")
			mkdir(t, dir, 0o700)
			if tt.fallback {
				dir = longDataDir(t)
			}
			sock := Path(dir)
			if tt.fallback {
				mkdir(t, filepath.Dir(sock), 0o700)
			}
			d := listenRecording(t, sock)
			if tt.setup != nil {
				tt.setup(t, dir, sock)
			}
			var out struct{ OK bool }
			err := ping(t.Context(), dialer(dir, tt.trust), &out)
			if tt.want == "" {
				if err != nil || !out.OK {
					t.Fatalf("request: %v %+v", err, out)
				}
				if line := d.next(t); line != "GET /ping HTTP/1.1" {
					t.Errorf("the daemon read %q", line)
				}
				return
			}
			if !errors.Is(err, ErrUntrusted) {
				t.Fatalf("err = %v, want ErrUntrusted", err)
			}
			for _, want := range []string{sock, tt.want, "nothing was sent"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "http://") {
				t.Errorf("error %q names the request", err)
			}
			probe(t, sock)
			if line := d.next(t); line != "probe" {
				t.Errorf("the socket got %q before the probe", line)
			}
		})
	}
}

// Nothing there: the daemon is not running, as before.
func TestDialNoDaemon(t *testing.T) {
	err := ping(t.Context(), Dialer(filepath.Join(t.TempDir(), "data")), nil)
	if !errors.Is(err, ErrDaemonNotRunning) {
		t.Errorf("err = %v, want ErrDaemonNotRunning", err)
	}
}

// ping is the command line's request over the socket (adminsock.Client's):
// GET /ping through dial, its JSON answer decoded into out, a failure to
// dial reported without the request's URL.
func ping(ctx context.Context, dial func(ctx context.Context, network, addr string) (net.Conn, error), out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, BaseURL+"/ping", nil)
	if err != nil {
		return err
	}
	resp, err := (&http.Client{Transport: &http.Transport{DialContext: dial}}).Do(req)
	if ue, ok := errors.AsType[*url.Error](err); ok {
		return ue.Err
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		return nil
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

func TestTrustedUIDs(t *testing.T) {
	euid := os.Geteuid()
	dir := filepath.Join(t.TempDir(), "data")
	mkdir(t, dir, 0o700)
	got := trustedUIDs(dir)
	if euid != 0 {
		if len(got) != 2 || got[0] != euid || got[1] != 0 {
			t.Errorf("trustedUIDs = %v, want [%d 0]", got, euid)
		}
		return
	}
	if len(got) != 1 || got[0] != 0 {
		t.Errorf("root's own data folder: trustedUIDs = %v, want [0]", got)
	}
	// Root trusts the owner of a data folder that only root could give it
	// (as /var/lib/blueline), not when others could have made it.
	chown(t, dir, nobody)
	parent := filepath.Dir(dir)
	for _, tt := range []struct {
		mode  fs.FileMode
		owner int
		want  []int
	}{
		{0o755, 0, []int{0, nobody}},
		{0o700, 0, []int{0, nobody}},
		{0o775, 0, []int{0}},
		{0o777 | fs.ModeSticky, 0, []int{0}},
		{0o755, nobody, []int{0}},
	} {
		if err := os.Chmod(parent, tt.mode); err != nil {
			t.Fatal(err)
		}
		chown(t, parent, tt.owner)
		if got := trustedUIDs(dir); !slices.Equal(got, tt.want) {
			t.Errorf("under a folder of uid %d and mode %v: trustedUIDs = %v, want %v", tt.owner, tt.mode, got, tt.want)
		}
	}
}

func TestPeerUID(t *testing.T) {
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("no peer credentials here")
	}
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			defer c.Close()
			io.Copy(io.Discard, c)
		}
	}()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if uid, err := peerUID(c); err != nil || uid != os.Geteuid() {
		t.Errorf("peerUID = %d, %v; want %d", uid, err, os.Geteuid())
	}
}

// A daemon impostor run by another user: it makes the fallback folder
// itself and listens in it. The CLI refuses the folder; and when its owner
// is changed to look right, the credentials of the process answering give
// it away. Either way it receives nothing.
func TestDialRefusesAnotherUsersProcess(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("runs a process as another user through Linux credentials")
	}
	needRoot(t)
	testkit.SharedTempDir(t)
	dir := longDataDir(t)
	sock := Path(dir)
	lines := startAsNobody(t, "TestFakeDaemonProcess", "BLUELINE_TEST_FAKE_DAEMON="+sock)
	if line := nextLine(t, lines); line != "listening" {
		t.Fatalf("the impostor says %q", line)
	}
	dial := Dialer(dir)

	err := ping(t.Context(), dial, nil)
	if want := fmt.Sprintf("its folder %s belongs to uid %d", filepath.Dir(sock), nobody); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
	probe(t, sock)
	if line := nextLine(t, lines); line != "probe" {
		t.Errorf("the impostor got %q before the probe", line)
	}

	chown(t, filepath.Dir(sock), 0)
	chown(t, sock, 0)
	err = ping(t.Context(), dial, nil)
	if want := fmt.Sprintf("the process answering on it runs as uid %d", nobody); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want %q", err, want)
	}
	if line := nextLine(t, lines); line != "eof" {
		t.Errorf("the impostor got %q from the CLI, want nothing", line)
	}
}

// TestFakeDaemonProcess is the impostor TestDialRefusesAnotherUsersProcess
// starts as another user: it makes the socket's folder, listens, and prints
// the first line of each connection ("eof" when none came).
func TestFakeDaemonProcess(t *testing.T) {
	sock := os.Getenv("BLUELINE_TEST_FAKE_DAEMON")
	if sock == "" {
		t.Skip("run by TestDialRefusesAnotherUsersProcess")
	}
	if err := os.Mkdir(filepath.Dir(sock), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o600); err != nil {
		t.Fatal(err)
	}
	fmt.Println("listening")
	for {
		c, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		fmt.Println(serveRecorded(c))
	}
}

// startAsNobody starts this test binary again, as uid and gid 65534, to run
// the test named run with env added, and returns its output's lines. A copy
// of the binary goes where that account can run it.
func startAsNobody(t *testing.T, run string, env ...string) <-chan string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/tmp", "blueline-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "server.test")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+run+"$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("the process as uid %d wrote to stderr:\n%s", nobody, stderr.String())
		}
	})
	return lines
}

func nextLine(t *testing.T, lines <-chan string) string {
	t.Helper()
	select {
	case line, ok := <-lines:
		if !ok {
			t.Fatal("the other process ended")
		}
		return line
	case <-time.After(testGuard):
		t.Fatal("the other process said nothing")
	}
	return ""
}

func mkdir(t *testing.T, path string, mode fs.FileMode) {
	t.Helper()
	if err := os.Mkdir(path, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}
