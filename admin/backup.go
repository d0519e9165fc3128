package admin

import (
	"net/http"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/julienschmidt/httprouter"
)

// adminBackup streams a consistent copy of the database (GET /backup on the
// admin socket) while the daemon goes on serving. A copy that fails midway
// cuts the connection, so the client sees a truncated answer, never a
// complete-looking one.
func (a *Admin) adminBackup(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "application/octet-stream")
	n, err := a.db.Backup(r.Context(), w)
	if err != nil {
		a.log.Error("backup failed", "bytes", n, "err", err, "request_id", httpapi.RequestID(r.Context()))
		if n == 0 {
			httpapi.WriteError(w, r, a.log, err)
			return
		}
		panic(http.ErrAbortHandler)
	}
	a.log.Info("backup taken", "bytes", n, "request_id", httpapi.RequestID(r.Context()))
}
