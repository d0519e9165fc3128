package messages

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/blueline-app/blueline/testkit"
)

// On Linux a connection to the helper's port must come from the daemon's
// own user: a fake helper in this process passes.
func TestSameUserPeer(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(accepted)
			return
		}
		accepted <- c
	}()
	client, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	conn, ok := <-accepted
	if !ok {
		t.Fatal("accept failed")
	}
	defer conn.Close()

	if err := platformPeerChecker().CheckPeer(t.Context(), conn); err != nil {
		t.Errorf("a connection of this process refused: %v", err)
	}
	other := sameUserPeer{uid: os.Geteuid() + 1, tables: []string{"/proc/net/tcp", "/proc/net/tcp6"}}
	err = other.CheckPeer(t.Context(), conn)
	if want := fmt.Sprintf("belongs to uid %d, not to uid %d", os.Geteuid(), os.Geteuid()+1); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("checked for another uid: %v, want %q", err, want)
	}
	none := sameUserPeer{uid: os.Geteuid(), tables: []string{filepath.Join(t.TempDir(), "missing")}}
	if err := none.CheckPeer(t.Context(), conn); err == nil || !strings.Contains(err.Error(), "not among") {
		t.Errorf("a connection in no table: %v", err)
	}
}

func TestTCPSocketUID(t *testing.T) {
	hex := func(ip net.IP, port int, v6 bool) string { return procNetAddr(&net.TCPAddr{IP: ip, Port: port}, v6) }
	lo := net.IPv4(127, 0, 0, 1)
	if got := hex(lo, 45670, false); binary.NativeEndian.Uint32([]byte{1, 2, 3, 4}) == 0x04030201 && got != "0100007F:B266" {
		t.Errorf("127.0.0.1:45670 is %q in /proc/net/tcp on this little-endian machine, want 0100007F:B266", got)
	}
	peer, server := hex(lo, 50000, false), hex(lo, 45670, false)
	table := strings.Join([]string{
		"  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
		"   0: " + server + " 00000000:0000 0A 00000000:00000000 00:00000000 00000000   501        0 1111 1 0 100 0 0 10 0",
		"   1: " + peer + " " + server + " 06 00000000:00000000 03:00000F2A 00000000     0        0 0 3 0",
		"   2: " + peer + " " + server + " 01 00000000:00000000 00:00000000 00000000  1001        0 2222 1 0 20 4 30 10 -1",
		"   3: " + server + " " + peer + " 01 00000000:00000000 00:00000000 00000000   501        0 3333 1 0 20 4 30 10 -1",
	}, "\n")
	uid, found, err := tcpSocketUID(strings.NewReader(table), &net.TCPAddr{IP: lo, Port: 50000}, &net.TCPAddr{IP: lo, Port: 45670}, false)
	if err != nil || !found || uid != 1001 {
		t.Errorf("tcpSocketUID = %d, %v, %v; want 1001 (the live socket, not the one in TIME_WAIT)", uid, found, err)
	}
	if _, found, _ := tcpSocketUID(strings.NewReader(table), &net.TCPAddr{IP: lo, Port: 50001}, &net.TCPAddr{IP: lo, Port: 45670}, false); found {
		t.Error("found a socket that is not in the table")
	}
	// An IPv6 socket connected to the IPv4 listener: IPv4-mapped in tcp6.
	mapped := hex(lo, 50002, true)
	if len(mapped) != 32+5 {
		t.Fatalf("tcp6 address %q", mapped)
	}
	table6 := "   0: " + mapped + " " + hex(lo, 45670, true) + " 01 00000000:00000000 00:00000000 00000000  1002        0 4444 1 0 20 4 30 10 -1\n"
	if uid, found, err := tcpSocketUID(strings.NewReader(table6), &net.TCPAddr{IP: lo, Port: 50002}, &net.TCPAddr{IP: lo, Port: 45670}, true); err != nil || !found || uid != 1002 {
		t.Errorf("tcp6: %d, %v, %v; want 1002", uid, found, err)
	}
}

// nobody is the account a foreign process runs as in these tests.
const nobody = 65534

// startAsNobody starts this test binary again, as uid and gid 65534, to run
// the test named run with env added. It needs root; a copy of the binary
// goes where that account can run it.
func startAsNobody(t *testing.T, run string, env ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root, to run a process as another user")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "blueline-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "peer.test")
	src, err := os.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+run+"$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, &out
}

// A fake helper in a process of another user, dialling the port the daemon
// listens on with the check it really uses: closed unread.
func TestHelperRefusesAnotherUsersProcess(t *testing.T) {
	var logs testkit.LogBuffer
	h, err := ListenHelper(t.Context(), 0, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	cmd, out := startAsNobody(t, "TestFakeHelperProcess", "BLUELINE_TEST_FAKE_HELPER="+h.Addr().String())
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the fake helper (uid %d): %v\n%s", nobody, err, out)
		}
	case <-time.After(2 * testGuard):
		t.Fatalf("the fake helper (uid %d) is still connected", nobody)
	}
	if !strings.Contains(out.String(), "connection closed by the daemon") {
		t.Errorf("the fake helper's output:\n%s", out)
	}
	noEvent(t, h)
	if h.Connected() {
		t.Error("connected to another user's process")
	}
	if want := fmt.Sprintf("belongs to uid %d, not to uid %d", nobody, os.Geteuid()); !strings.Contains(logs.String(), want) {
		t.Errorf("log lacks %q:\n%s", want, logs.String())
	}
	// The daemon's own user still gets in.
	connectPeer(t, h)
	waitConnected(t, h, true)
}

// TestFakeHelperProcess is the fake helper of another user that
// TestHelperRefusesAnotherUsersProcess starts: it connects, greets, and
// waits for the daemon to close the connection.
func TestFakeHelperProcess(t *testing.T) {
	addr := os.Getenv("BLUELINE_TEST_FAKE_HELPER")
	if addr == "" {
		t.Skip("run by TestHelperRefusesAnotherUsersProcess")
	}
	conn, err := net.DialTimeout("tcp", addr, testGuard)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	io.WriteString(conn, `{"event":"ping","message":"Helper Connected!"}`+"\r\n")
	conn.SetReadDeadline(time.Now().Add(testGuard))
	n, err := io.Copy(io.Discard, conn)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatal("the daemon kept the connection open")
	}
	fmt.Printf("connection closed by the daemon after %d bytes\n", n)
}
