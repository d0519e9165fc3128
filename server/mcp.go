package server

import (
	"context"
	"net/http"

	"github.com/blueline-app/blueline/httpapi"
)

// MCPPath is where the API's listener serves the MCP endpoint for agents
// (package mcpserver), behind RequireKey.
const MCPPath = "/mcp"

// mcpCORS: the headers MCP's streamable HTTP transport uses.
var mcpCORS = corsPolicy{
	expose:       "X-Request-Id, Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate",
	allowHeaders: "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID",
}

// RequireKey guards the MCP endpoint: a request needs a valid API key, as
// an API request does, and is otherwise answered 401 in the API's error
// shape before any MCP exchange. api.Scopes, lines and the rate limit are not
// checked here: each tool call is an API request made as the same key,
// which checks them. CORS is the endpoint's own: keys travel in a header,
// never in cookies, so any origin may call, with the headers MCP uses.
func (s *Server) RequireKey(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setRoute(w, MCPPath) // one route in the request metrics
		if mcpCORS.answer(w, r) {
			return
		}
		key, err := s.authenticate(r)
		if err != nil {
			httpapi.WriteError(w, r, s.log, err)
			return
		}
		s.keyUse.touch(r.Context(), key, s.now())
		next.ServeHTTP(w, r)
	})
}

// CheckKey tells whether an API request with the Authorization header's
// value authorization, to routes that need scopes, would get past the key
// check, the key's request limit and the scope check now: nil, or the
// API's refusal (401, 429, 403). It counts as one of the key's requests.
// The MCP endpoint asks it before work that a refused call must not cause:
// send_message fetching an attachment's URL.
func (s *Server) CheckKey(ctx context.Context, authorization string, scopes ...string) error {
	key, err := s.keyFor(ctx, authorization)
	if err != nil {
		return err
	}
	s.keyUse.touch(ctx, key, s.now())
	if ok, wait := s.limiter.allow(key.ID, s.now()); !ok {
		return s.errRateLimited(wait)
	}
	for _, scope := range scopes {
		if !hasScope(key, scope) {
			return errInsufficientScope(scope)
		}
	}
	return nil
}
