package server

import (
	"net/http"
	"strings"
	"time"
	"unicode"

	"github.com/blueline-app/blueline/storage"
)

// The admin socket's dashboard routes: the host's operator hands out login
// links, sets the password and ends sessions.

var errNoDashboard = errTurnedOff("dashboard_disabled", "The dashboard is off: set [dashboard] enabled = true and restart the daemon.")

func (s *Server) adminDashboardLink(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Dashboard == nil {
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
		return errInvalid("owner", "The owner may not contain control characters.")
	}
	link, expires, err := s.opts.Dashboard.LoginLink(r.Context(), req.Owner)
	if err != nil {
		return err
	}
	s.log.Info("dashboard login link issued", "owner", req.Owner)
	writeJSON(w, http.StatusCreated, map[string]any{"url": link, "expires_at": expires, "owner": req.Owner})
	return nil
}

// minPasswordLen is the shortest dashboard password: it guards a page
// reachable from the network, behind a slow hash and a rate limit.
const minPasswordLen = 12

func (s *Server) adminDashboardPassword(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Dashboard == nil {
		return errNoDashboard
	}
	var req struct {
		Password string `json:"password"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	if req.Password != "" && len([]rune(req.Password)) < minPasswordLen {
		return errInvalid("password", "The password must have at least %d characters.", minPasswordLen)
	}
	if len(req.Password) > 1024 {
		return errInvalid("password", "The password may have at most 1024 bytes.")
	}
	if err := s.opts.Dashboard.SetPassword(r.Context(), req.Password); err != nil {
		return err
	}
	s.log.Info("dashboard password changed", "set", req.Password != "")
	writeJSON(w, http.StatusOK, map[string]any{"password_set": req.Password != "", "request_id": requestID(r.Context())})
	return nil
}

// SessionInfo describes a signed-in dashboard browser.
type SessionInfo struct {
	ID        string `json:"id"`
	Owner     string `json:"owner"`
	Via       string `json:"via"`
	CreatedAt int64  `json:"created_at"`
	ExpiresAt int64  `json:"expires_at"`
}

func (s *Server) adminDashboardSessions(w http.ResponseWriter, r *http.Request) error {
	sessions, err := s.db.Sessions(r.Context(), time.Now().UnixMilli())
	if err != nil {
		return err
	}
	out := make([]SessionInfo, len(sessions))
	for i, ss := range sessions {
		out[i] = SessionInfo{ID: ss.ID, Owner: ss.Owner, Via: ss.Via, CreatedAt: ss.CreatedAt, ExpiresAt: ss.ExpiresAt}
	}
	writeJSON(w, http.StatusOK, newList(r.Context(), out, nil))
	return nil
}

// adminDashboardSignOut ends one session by ID, or every session when no
// ID is given.
func (s *Server) adminDashboardSignOut(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	var ids []string
	if req.ID != "" {
		if !storage.ValidID(req.ID, "ses_") {
			return errNotFound("session_not_found", "id", "No session %q.", req.ID)
		}
		ids = []string{req.ID}
	}
	n, err := s.db.RevokeSessions(r.Context(), ids...)
	if err != nil {
		return err
	}
	if req.ID != "" && n == 0 {
		return errNotFound("session_not_found", "id", "No session %q.", req.ID)
	}
	s.log.Info("dashboard sessions ended", "count", n)
	writeJSON(w, http.StatusOK, map[string]any{"ended": n, "request_id": requestID(r.Context())})
	return nil
}
