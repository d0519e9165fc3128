package messages

import "os"

// platformPeerChecker on a Mac: the connection must come from the Messages
// app of the daemon's user.
func platformPeerChecker() PeerChecker {
	return messagesPeer{uid: os.Getuid(), lsof: runLsof}
}
