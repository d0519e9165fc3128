//go:build !linux && !darwin

package adminsock

import "net"

// peerUID: this system's peer credentials are not read; the CLI relies on
// the socket file's owner alone.
func peerUID(net.Conn) (int, error) { return -1, errNoPeerCredentials }
