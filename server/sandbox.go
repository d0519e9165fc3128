package server

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/blueline-app/blueline/api"
	"github.com/blueline-app/blueline/storage"
)

// The sandbox line is shared; each owner has its own sandbox on it (see
// storage/sandbox.go): its own activation code, its own paired phone, its
// own daily quota, and the one-to-one chat with that phone as the only chat
// it can see there.

// Sandbox statuses, as the reference service names them.
const (
	sandboxMissing = "missing"
	sandboxPending = "pending"
	sandboxActive  = "active"
)

func (s *Server) toAPISandbox(ctx context.Context, line storage.Line, st storage.SandboxState, started bool) (api.Sandbox, error) {
	now := s.now().UTC()
	out := api.Sandbox{Status: sandboxMissing, SandboxLineHandle: line.Handle, RequestID: requestID(ctx)}
	if started {
		out.Status, out.ActivationCode = sandboxPending, &st.ActivationCode
		if st.Activated {
			out.Status = sandboxActive
			out.ContactIdentifier, out.ActivatedAt = nonEmpty(st.PairedHandle), nonZero(st.ActivatedAt)
		}
	}
	used := 0
	if st.Owner != "" {
		var err error
		if used, err = s.db.SandboxSends(ctx, st.Owner, now.Format(time.DateOnly)); err != nil {
			return out, err
		}
	}
	out.Usage = api.SandboxUsage{Used: used, Limit: s.opts.SandboxQuota, Remaining: max(0, s.opts.SandboxQuota-used),
		ResetsAt: now.Truncate(24 * time.Hour).Add(24 * time.Hour).UnixMilli()}
	return out, nil
}

// sandboxFor finds the sandbox line for the request's key, which must have
// an owner.
func (s *Server) sandboxFor(r *http.Request) (storage.Line, string, error) {
	line, ok := s.db.SandboxLine()
	if !ok {
		return line, "", errNotFound("line_not_found", "", "No sandbox line is configured on this server ([sandbox] handle).")
	}
	key := apiKey(r.Context())
	return line, key.Owner, checkLineAccess(key, line)
}

// getSandbox answers the key owner's sandbox state.
func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request) error {
	return s.answerSandbox(w, r, false)
}

// startSandbox starts the key owner's activation: 201 with a new code, or
// 200 with the state it already has.
func (s *Server) startSandbox(w http.ResponseWriter, r *http.Request) error {
	return s.answerSandbox(w, r, true)
}

func (s *Server) answerSandbox(w http.ResponseWriter, r *http.Request, start bool) error {
	line, owner, err := s.sandboxFor(r)
	if err != nil {
		return err
	}
	var st storage.SandboxState
	started, status := true, http.StatusOK
	if start {
		var created bool
		if st, created, err = s.db.StartSandbox(r.Context(), owner); created {
			status = http.StatusCreated
		}
	} else {
		st, started, err = s.db.Sandbox(r.Context(), owner)
	}
	if err != nil {
		return err
	}
	out, err := s.toAPISandbox(r.Context(), line, st, started)
	if err != nil {
		return err
	}
	writeJSON(w, status, out)
	return nil
}

// sandboxChatVisible reports whether the request's key may see chat c: on
// the sandbox line only the one-to-one chat with its owner's paired phone.
func (s *Server) sandboxChatVisible(ctx context.Context, line storage.Line, c storage.Chat) (bool, error) {
	if !line.IsSandbox {
		return true, nil
	}
	key := apiKey(ctx)
	if key.Owner == "" || c.IsGroup {
		return false, nil
	}
	st, ok, err := s.db.Sandbox(ctx, key.Owner)
	return ok && st.Activated && c.Identifier == st.PairedHandle, err
}

// SandboxOwnerInfo is one owner's sandbox in `blueline sandbox`.
type SandboxOwnerInfo struct {
	Owner string `json:"owner"`
	api.Sandbox
}

// SandboxInfo is what `blueline sandbox` prints: every owner's sandbox, the
// owners of keys that have not started one included.
type SandboxInfo struct {
	Handle string             `json:"handle"`
	LineID string             `json:"line_id"`
	Owners []SandboxOwnerInfo `json:"owners"`
}

func (s *Server) adminSandbox(w http.ResponseWriter, r *http.Request) error {
	line, ok := s.db.SandboxLine()
	if !ok {
		return errNotFound("line_not_found", "", "No sandbox line is configured ([sandbox] handle).")
	}
	ctx := r.Context()
	states, err := s.db.SandboxStates(ctx)
	if err != nil {
		return err
	}
	keys, err := s.db.Keys(ctx)
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
	info := SandboxInfo{Handle: line.Handle, LineID: line.ID, Owners: []SandboxOwnerInfo{}}
	for _, o := range owners {
		st, started := byOwner[o]
		st.Owner = o
		out, err := s.toAPISandbox(ctx, line, st, started)
		if err != nil {
			return err
		}
		out.RequestID = ""
		info.Owners = append(info.Owners, SandboxOwnerInfo{Owner: o, Sandbox: out})
	}
	writeJSON(w, http.StatusOK, info)
	return nil
}

// adminStartSandbox starts an owner's activation, as POST /v1/sandbox does
// for a key's owner.
func (s *Server) adminStartSandbox(w http.ResponseWriter, r *http.Request) error {
	line, ok := s.db.SandboxLine()
	if !ok {
		return errNotFound("line_not_found", "", "No sandbox line is configured ([sandbox] handle).")
	}
	b, err := s.readBody(r)
	if err != nil {
		return err
	}
	owner, err := b.required("owner")
	if err != nil {
		return err
	}
	owner = strings.TrimSpace(owner)
	st, _, err := s.db.StartSandbox(r.Context(), owner)
	if err != nil {
		return err
	}
	out, err := s.toAPISandbox(r.Context(), line, st, true)
	if err != nil {
		return err
	}
	out.RequestID = ""
	writeJSON(w, http.StatusOK, SandboxOwnerInfo{Owner: owner, Sandbox: out})
	return nil
}
