package server

import (
	"io"
	"net/http"
	"strings"
)

// bodyOvershoot is how far past its limit a request body is read, and
// dropped, before its 413 is sent. Many clients write the whole request
// before they read the answer; if the daemon answered and closed while one
// was still writing, the close would reset the connection, and the reset
// would take the answer with it. A client that may send more than this over
// the limit should ask first with Expect: 100-continue: a body too large by
// its Content-Length is then refused before any of it is sent.
const bodyOvershoot = 1 << 20

// dropOvershoot reads and drops the rest of a body found to be over limit,
// of which read bytes were read, as long as the whole body stays within
// bodyOvershoot past the limit; beyond that it is left unread, and net/http
// closes the connection as gently as it can. The 413 then closes the
// connection (writeError). A body that the client holds back until told to
// continue (Expect: 100-continue, and nothing read yet) is never asked for.
func dropOvershoot(r *http.Request, read, limit int64) {
	if r.ContentLength > limit+bodyOvershoot || read == 0 && expectsContinue(r) {
		return
	}
	io.Copy(io.Discard, io.LimitReader(r.Body, limit+bodyOvershoot-read))
}

func expectsContinue(r *http.Request) bool {
	return strings.EqualFold(strings.TrimSpace(r.Header.Get("Expect")), "100-continue")
}
