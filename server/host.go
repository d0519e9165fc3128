package server

import (
	"context"
	"net/http"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// What the admin socket's commands show, as the API shows it (package
// admin's API).

// Message is m as the API shows it.
func (s *Server) Message(m storage.Message) api.Message { return s.toAPIMessage(m) }

// Reaction is r as the API shows it.
func (s *Server) Reaction(r storage.Reaction) api.Reaction { return toAPIReaction(r) }

// ChatEventData is a change of a chat as the API's events show it.
func (s *Server) ChatEventData(u storage.ChatUpdate, lineHandle string) api.ChatEventData {
	return toChatEventData(u, lineHandle)
}

// FindMessage is the message of line that value (an ID or a GUID) names;
// param names the parameter in the refusal.
func (s *Server) FindMessage(r *http.Request, line storage.Line, value, param string) (storage.Message, error) {
	return s.findMessage(r, line, value, param)
}

// Sandbox is an owner's sandbox on line as the API shows it.
func (s *Server) Sandbox(ctx context.Context, line storage.Line, st storage.SandboxState, started bool) (api.Sandbox, error) {
	return s.toAPISandbox(ctx, line, st, started)
}

// ForgetAvailability drops the kept answers of whether handle is on
// iMessage, when the simulated network's answer changes.
func (s *Server) ForgetAvailability(handle string) { s.availability.forget(handle) }
