package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/listener"
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

// bodyStalled answers a request whose body listener.BodyIdleTimeout cut
// off: 408 request_timeout in the API's shape, with only the headers the
// API's wrappers set for every answer (the request ID, CORS) kept of what
// the handler set, and the connection closing, as nothing more can be read
// from it.
func (s *Server) bodyStalled(w http.ResponseWriter, r *http.Request, st listener.Stall) {
	s.log.Debug("request body stalled", "method", r.Method, "path", r.URL.Path, "request_id", httpapi.RequestID(r.Context()), "idle", st.Idle)
	if st.Answered {
		return
	}
	h := w.Header()
	for k := range h {
		if k != "X-Request-Id" && !strings.HasPrefix(k, "Access-Control-") {
			delete(h, k)
		}
	}
	h.Set("Connection", "close")
	msg := fmt.Sprintf("The request body stopped arriving: nothing came for %s ([limits] body_idle_timeout). "+
		"Nothing was done; send the request again on a new connection.", st.Idle)
	if st.Total > 0 {
		msg = fmt.Sprintf("The request body did not arrive within %s, all a request without a valid credential has for it. "+
			"Nothing was done; send the request again on a new connection.", st.Total)
	}
	httpapi.WriteError(w, r, s.log, httpapi.RequestTimeout(msg))
}
