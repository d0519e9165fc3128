package server

import (
	"net/http"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/apidoc"

	"github.com/julienschmidt/httprouter"
)

type checkBody struct {
	OK     bool   `json:"ok"`
	Reason string `json:"reason,omitempty"`
	Info   string `json:"info,omitempty"`
}

// healthz answers while the process serves: no authentication, no data.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 when the daemon can do its work (storage answers, the
// workers run, every line's bridge runs) and 503 otherwise, with each check
// by name. No authentication: it shows no messages, contacts or keys.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	checks := []api.Check{{Name: "storage", OK: true}}
	if err := s.db.Ping(r.Context()); err != nil {
		// The answer is public: the error (a path, say) goes to the log only.
		s.log.Error("readiness: the database does not answer", "err", err)
		checks[0] = api.Check{Name: "storage", Reason: "the database does not answer (see the log)"}
	}
	if s.opts.Ready != nil {
		checks = append(checks, s.opts.Ready(r.Context())...)
	}
	status, code := "ready", http.StatusOK
	body := map[string]checkBody{}
	for _, c := range checks {
		b := checkBody{OK: c.OK, Info: c.Info}
		if !c.OK {
			b.Reason = c.Reason
			if b.Reason == "" {
				b.Reason = "not ready"
			}
			status, code = "not_ready", http.StatusServiceUnavailable
		}
		body[c.Name] = b
	}
	w.Header().Set("Cache-Control", "no-store")
	httpapi.WriteJSON(w, code, map[string]any{"status": status, "checks": body})
}

// openAPIDocument serves the API's OpenAPI document, embedded in the binary.
func (s *Server) openAPIDocument(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=3600")
	w.Write(apidoc.JSON())
}
