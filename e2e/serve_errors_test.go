package e2e

import (
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// `blueline serve` names each path and address once in its errors, and
// says what to do.
func TestServeErrors(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "blueline.toml")
	serve := func(doc string) string {
		t.Helper()
		writeFile(t, path, doc)
		_, errOut, code := runCLI("serve", "--config", path)
		if code != 1 {
			t.Fatalf("serve: exit %d, %q; want 1", code, errOut)
		}
		return strings.TrimSpace(errOut)
	}
	sandbox := "[sandbox]\nhandle = \"+15550000000\"\n"

	// A database that cannot be opened (here a folder in its place, which
	// even root cannot open as a file).
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(filepath.Join(data, "db.bolt"), 0o700); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(data, "db.bolt")
	if got, want := serve("[server]\nlisten = \"127.0.0.1:0\"\n[storage]\ndir = \""+data+"\"\n"+sandbox), "blueline: open "+db+": is a directory"; got != want {
		t.Errorf("unopenable database: %q, want %q", got, want)
	}

	// A configuration file that cannot be read.
	if _, errOut, code := runCLI("serve", "--config", dir); code != 1 || strings.TrimSpace(errOut) != "blueline: config "+dir+": cannot read it: is a directory" {
		t.Errorf("unreadable config: exit %d, %q", code, errOut)
	}

	// A port in use: the address once, and a hint.
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	addr := taken.Addr().String()
	got := serve("[server]\nlisten = \"" + addr + "\"\n[storage]\ndir = \"" + filepath.Join(dir, "d2") + "\"\n" + sandbox)
	if strings.Count(got, addr) != 1 || !strings.Contains(got, "address already in use: another program") || !strings.Contains(got, "[server] listen") {
		t.Errorf("port in use: %q", got)
	}

	// A bare duration names its key and line.
	got = serve("[storage]\ndir = \"" + filepath.Join(dir, "d3") + "\"\n" + sandbox + "[[lines]]\nhandle = \"+15550000001\"\n\n[[lines]]\nhandle = \"+15550000002\"\npoll = 5\n")
	if !strings.Contains(got, path+":10: lines[1].poll: invalid duration 5: write a quoted number with a unit") {
		t.Errorf("bare duration: %q", got)
	}

	// A Messages line elsewhere than on a Mac.
	if runtime.GOOS != "darwin" {
		got = serve("[storage]\ndir = \"" + filepath.Join(dir, "d4") + "\"\n[[lines]]\nhandle = \"+15550000001\"\nbridge = \"messages\"\n")
		if !strings.Contains(got, "+15550000001") || !strings.Contains(got, "the messages bridge needs macOS") {
			t.Errorf("messages bridge on %s: %q", runtime.GOOS, got)
		}
	}
}
