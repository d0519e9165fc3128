package server

import (
	"net/http"

	"github.com/blueline-app/blueline/storage"
)

// Authenticate finds the key r's Authorization header names, as the API
// does, without counting the request against the key's rate limit or
// recording its use: for a fleet's entry node, which has the API answer
// the request first (authenticated, counted) and then forwards the
// verified key record, never the secret, to the node of the request's line
// (package fleet/route).
//
// A request made in process (the console, the admin socket, MCP: see
// WithCaller) is its caller's.
func (s *Server) Authenticate(r *http.Request) (storage.Key, error) {
	if k, ok := inProcessCaller(r.Context()); ok {
		return k, nil
	}
	return s.keyFor(r.Context(), r.Header.Get("Authorization"))
}
