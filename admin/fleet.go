package admin

import (
	"net/http"

	"github.com/blueline-app/blueline/httpapi"
)

func (a *Admin) fleetStatus(w http.ResponseWriter, r *http.Request) error {
	if a.opts.Fleet == nil {
		return httpapi.TurnedOff("fleet_disabled", "This host is not a node of a fleet: add a [fleet] section and restart the daemon.")
	}
	st, err := a.opts.Fleet(r.Context())
	if err != nil {
		return httpapi.Unavailable("fleet_unavailable", "The fleet did not answer: %v", err)
	}
	httpapi.WriteJSON(w, http.StatusOK, st)
	return nil
}
