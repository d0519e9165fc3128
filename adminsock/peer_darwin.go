package adminsock

import (
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// peerUID is the effective uid of the process at the other end of a Unix
// socket connection (LOCAL_PEERCRED: as it was when it connected or
// listened).
func peerUID(c net.Conn) (uid int, err error) {
	err = onUnixSocket(c, func(fd int) error {
		cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
		if err != nil {
			return fmt.Errorf("LOCAL_PEERCRED: %w", err)
		}
		uid = int(cred.Uid)
		return nil
	})
	return uid, err
}
