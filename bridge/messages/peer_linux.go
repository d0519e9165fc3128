package messages

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
)

// platformPeerChecker on Linux: there is no Messages app here, and the
// bridge runs only against a test database and a fake helper. The check
// that is left is the user: the connection must come from a socket of the
// daemon's own user, as the kernel's TCP tables (/proc/net/tcp) say.
func platformPeerChecker() PeerChecker {
	return sameUserPeer{uid: os.Geteuid(), tables: []string{"/proc/net/tcp", "/proc/net/tcp6"}}
}

// sameUserPeer accepts a loopback TCP connection whose other end belongs to
// uid.
type sameUserPeer struct {
	uid    int
	tables []string // /proc/net/tcp and tcp6
}

func (p sameUserPeer) CheckPeer(_ context.Context, conn net.Conn) error {
	local, ok1 := conn.LocalAddr().(*net.TCPAddr)
	remote, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return fmt.Errorf("not a TCP connection: %s", conn.RemoteAddr())
	}
	for _, table := range p.tables {
		f, err := os.Open(table)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		// The peer's end: its local address is our remote one.
		uid, found, err := tcpSocketUID(f, remote, local, strings.HasSuffix(table, "6"))
		f.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", table, err)
		}
		if !found {
			continue
		}
		if uid != p.uid {
			return fmt.Errorf("the other end (%s) belongs to uid %d, not to uid %d that runs the daemon", remote, uid, p.uid)
		}
		return nil
	}
	return fmt.Errorf("the other end (%s) is not among this system's TCP sockets", remote)
}

// tcpSocketUID finds the socket from local to remote in a /proc/net/tcp or
// tcp6 table and returns its owner's uid. Sockets in TIME_WAIT, which
// belong to no one any more, are skipped.
func tcpSocketUID(table io.Reader, local, remote *net.TCPAddr, v6 bool) (uid int, found bool, err error) {
	wantLocal, wantRemote := procNetAddr(local, v6), procNetAddr(remote, v6)
	if wantLocal == "" || wantRemote == "" {
		return 0, false, nil
	}
	sc := bufio.NewScanner(table)
	for sc.Scan() {
		// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
		f := strings.Fields(sc.Text())
		if len(f) < 10 || f[1] != wantLocal || f[2] != wantRemote || f[3] == "06" || f[9] == "0" {
			continue
		}
		uid, err := strconv.Atoi(f[7])
		if err != nil {
			return 0, false, fmt.Errorf("uid %q: %w", f[7], err)
		}
		return uid, true, nil
	}
	return 0, false, sc.Err()
}

// procNetAddr writes an address as /proc/net/tcp does: the address as
// 32-bit words in the machine's byte order, in hex, then the port. In the
// tcp6 table an IPv4 address is IPv4-mapped. "" when it cannot be there.
func procNetAddr(a *net.TCPAddr, v6 bool) string {
	ip := a.IP.To4()
	if v6 {
		ip = a.IP.To16()
	}
	if ip == nil {
		return ""
	}
	var b strings.Builder
	for i := 0; i < len(ip); i += 4 {
		fmt.Fprintf(&b, "%08X", binary.NativeEndian.Uint32(ip[i:i+4]))
	}
	fmt.Fprintf(&b, ":%04X", a.Port)
	return b.String()
}
