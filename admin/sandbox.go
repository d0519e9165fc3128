package admin

import (
	"net/http"
	"slices"
	"strings"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/storage"
)

func (a *Admin) adminSandbox(w http.ResponseWriter, r *http.Request) error {
	line, ok := a.db.SandboxLine()
	if !ok {
		return httpapi.NotFound("line_not_found", "", "No sandbox line is configured ([sandbox] handle).")
	}
	ctx := r.Context()
	states, err := a.db.SandboxStates(ctx)
	if err != nil {
		return err
	}
	keys, err := a.db.Keys(ctx)
	if err != nil {
		return err
	}
	byOwner := map[string]storage.SandboxState{}
	for _, st := range states {
		byOwner[st.Owner] = st
	}
	owners := make([]string, 0, len(byOwner))
	for o := range byOwner {
		owners = append(owners, o)
	}
	for _, k := range keys {
		if k.Owner != "" && k.RevokedAt == 0 && !slices.Contains(owners, k.Owner) {
			owners = append(owners, k.Owner)
		}
	}
	slices.Sort(owners)
	info := api.SandboxInfo{Handle: line.Handle, LineID: line.ID, Owners: []api.SandboxOwnerInfo{}}
	for _, o := range owners {
		st, started := byOwner[o]
		st.Owner = o
		out, err := a.api.Sandbox(ctx, line, st, started)
		if err != nil {
			return err
		}
		out.RequestID = ""
		info.Owners = append(info.Owners, api.SandboxOwnerInfo{Owner: o, Sandbox: out})
	}
	httpapi.WriteJSON(w, http.StatusOK, info)
	return nil
}

// adminStartSandbox starts an owner's activation, as POST /v1/sandbox does
// for a key's owner.
func (a *Admin) adminStartSandbox(w http.ResponseWriter, r *http.Request) error {
	line, ok := a.db.SandboxLine()
	if !ok {
		return httpapi.NotFound("line_not_found", "", "No sandbox line is configured ([sandbox] handle).")
	}
	var req struct {
		Owner string `json:"owner"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	owner := strings.TrimSpace(req.Owner)
	if owner == "" {
		return httpapi.Missing("owner")
	}
	st, _, err := a.db.StartSandbox(r.Context(), owner)
	if err != nil {
		return err
	}
	out, err := a.api.Sandbox(r.Context(), line, st, true)
	if err != nil {
		return err
	}
	out.RequestID = ""
	httpapi.WriteJSON(w, http.StatusOK, api.SandboxOwnerInfo{Owner: owner, Sandbox: out})
	return nil
}

func (a *Admin) adminSimAvailability(w http.ResponseWriter, r *http.Request) error {
	var req api.SimAvailability
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	h, err := handle.Normalize(req.Handle)
	if err != nil {
		return httpapi.BadHandle("handle", req.Handle, err)
	}
	if a.opts.SimAvailability == nil {
		return httpapi.InvalidRequest("sim_unavailable", "", "This daemon has no simulated network.")
	}
	a.opts.SimAvailability(h, req.IMessage)
	a.api.ForgetAvailability(h)
	httpapi.WriteJSON(w, http.StatusOK, api.SimAvailability{Handle: h, IMessage: req.IMessage})
	return nil
}
