package server

import (
	"net/http"
)

// MCPPath is where the API's listener serves Options.MCP, the MCP endpoint
// for agents (package mcpserver).
const MCPPath = "/mcp"

// mcpCORS: the headers MCP's streamable HTTP transport uses.
var mcpCORS = corsPolicy{
	expose:       "X-Request-Id, Mcp-Session-Id, Mcp-Protocol-Version, WWW-Authenticate",
	allowHeaders: "Authorization, Content-Type, Accept, Mcp-Session-Id, Mcp-Protocol-Version, Last-Event-ID",
}

// mcpHandler guards the MCP endpoint: a request needs a valid API key, as
// an API request does, and is otherwise answered 401 in the API's error
// shape before any MCP exchange. Scopes, lines and the rate limit are not
// checked here: each tool call is an API request made as the same key,
// which checks them. CORS is the endpoint's own: keys travel in a header,
// never in cookies, so any origin may call, with the headers MCP uses.
func (s *Server) mcpHandler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setRoute(w, MCPPath) // one route in the request metrics
		if mcpCORS.answer(w, r) {
			return
		}
		h := w.Header()
		key, err := s.authenticate(r)
		if err != nil {
			h.Set("WWW-Authenticate", `Bearer realm="blueline"`)
			writeError(w, r, s.log, err)
			return
		}
		s.keyUse.touch(r.Context(), key, s.now())
		next.ServeHTTP(w, r)
	})
}
