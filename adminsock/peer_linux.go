package adminsock

import (
	"fmt"
	"net"
	"syscall"
)

// peerUID is the uid of the process at the other end of a Unix socket
// connection (for a listening daemon: as it was when it listened).
func peerUID(c net.Conn) (uid int, err error) {
	err = onUnixSocket(c, func(fd int) error {
		cred, err := syscall.GetsockoptUcred(fd, syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		if err != nil {
			return fmt.Errorf("SO_PEERCRED: %w", err)
		}
		uid = int(cred.Uid)
		return nil
	})
	return uid, err
}
