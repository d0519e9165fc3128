//go:build !darwin && !linux

package messages

import (
	"context"
	"errors"
	"net"
)

// platformPeerChecker elsewhere refuses every connection: there is no
// Messages app, and no way to tell who connected.
func platformPeerChecker() PeerChecker {
	return PeerCheckFunc(func(context.Context, net.Conn) error {
		return errors.New("the private-API helper is not supported on this system")
	})
}
