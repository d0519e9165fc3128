package server

import (
	"context"
	"net/http"
	"time"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/client/api"
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
	out := api.Sandbox{Status: sandboxMissing, SandboxLineHandle: line.Handle, RequestID: httpapi.RequestID(ctx)}
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
		return line, "", httpapi.NotFound("line_not_found", "", "No sandbox line is configured on this server ([sandbox] handle).")
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
	httpapi.WriteJSON(w, status, out)
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
