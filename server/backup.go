package server

import (
	"context"
	"io"
	"net/http"

	"github.com/julienschmidt/httprouter"
)

// adminBackup streams a consistent copy of the database (GET /backup on the
// admin socket) while the daemon goes on serving. A copy that fails midway
// cuts the connection, so the client sees a truncated answer, never a
// complete-looking one.
func (s *Server) adminBackup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "application/octet-stream")
	n, err := s.db.Backup(r.Context(), w)
	if err != nil {
		s.log.Error("backup failed", "bytes", n, "err", err, "request_id", requestID(r.Context()))
		if n == 0 {
			writeError(w, r, s.log, err)
			return
		}
		panic(http.ErrAbortHandler)
	}
	s.log.Info("backup taken", "bytes", n, "request_id", requestID(r.Context()))
}

// Stream makes a GET whose answer may take long to read (a backup): unlike
// Do, it has no overall timeout, only ctx. The caller reads the body and
// closes it; a body cut short reads as an error (io.ErrUnexpectedEOF).
func (c *AdminClient) Stream(ctx context.Context, path string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, AdminBaseURL+path, nil)
	if err != nil {
		return nil, err
	}
	client := *c.http
	client.Timeout = 0
	resp, err := c.send(&client, req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		if err != nil {
			return nil, err
		}
		return nil, answerError(resp, data)
	}
	return resp.Body, nil
}
