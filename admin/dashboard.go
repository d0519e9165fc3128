package admin

import (
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/storage"
)

// The admin socket's dashboard routes: the host's operator hands out login
// links, sets the password and ends sessions.

var errNoDashboard = httpapi.TurnedOff("dashboard_disabled", "The dashboard is off: set [dashboard] enabled = true and restart the daemon.")

func (a *Admin) adminDashboardLink(w http.ResponseWriter, r *http.Request) error {
	if a.opts.Dashboard == nil {
		return errNoDashboard
	}
	var req struct {
		Owner string `json:"owner"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	req.Owner = strings.TrimSpace(req.Owner)
	if strings.ContainsFunc(req.Owner, unicode.IsControl) {
		return httpapi.Invalid("owner", "The owner may not contain control characters.")
	}
	link, expires, err := a.opts.Dashboard.LoginLink(r.Context(), req.Owner)
	if err != nil {
		return err
	}
	a.log.Info("dashboard login link issued", "owner", req.Owner)
	httpapi.WriteJSON(w, http.StatusCreated, map[string]any{"url": link, "expires_at": expires, "owner": req.Owner})
	return nil
}

// minPasswordLen is the shortest dashboard password: it guards a page
// reachable from the network, behind a slow hash and a rate limit.
const minPasswordLen = 12

func (a *Admin) adminDashboardPassword(w http.ResponseWriter, r *http.Request) error {
	if a.opts.Dashboard == nil {
		return errNoDashboard
	}
	var req struct {
		Password string `json:"password"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	if req.Password != "" && len([]rune(req.Password)) < minPasswordLen {
		return httpapi.Invalid("password", "The password must have at least %d characters.", minPasswordLen)
	}
	if len(req.Password) > 1024 {
		return httpapi.Invalid("password", "The password may have at most 1024 bytes.")
	}
	if err := a.opts.Dashboard.SetPassword(r.Context(), req.Password); err != nil {
		return err
	}
	a.log.Info("dashboard password changed", "set", req.Password != "")
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"password_set": req.Password != "", "request_id": httpapi.RequestID(r.Context())})
	return nil
}

func (a *Admin) adminDashboardSessions(w http.ResponseWriter, r *http.Request) error {
	sessions, err := a.db.Sessions(r.Context(), time.Now().UnixMilli())
	if err != nil {
		return err
	}
	out := make([]api.SessionInfo, len(sessions))
	for i, ss := range sessions {
		out[i] = api.SessionInfo{ID: ss.ID, Owner: ss.Owner, Via: ss.Via, CreatedAt: ss.CreatedAt, ExpiresAt: ss.ExpiresAt}
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, nil))
	return nil
}

// adminDashboardSignOut ends one session by ID, or every session when no
// ID is given.
func (a *Admin) adminDashboardSignOut(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	var ids []string
	if req.ID != "" {
		if !storage.ValidID(req.ID, "ses_") {
			return httpapi.NotFound("session_not_found", "id", "No session %q.", req.ID)
		}
		ids = []string{req.ID}
	}
	n, err := a.db.RevokeSessions(r.Context(), ids...)
	if err != nil {
		return err
	}
	if req.ID != "" && n == 0 {
		return httpapi.NotFound("session_not_found", "id", "No session %q.", req.ID)
	}
	a.log.Info("dashboard sessions ended", "count", n)
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"ended": n, "request_id": httpapi.RequestID(r.Context())})
	return nil
}
