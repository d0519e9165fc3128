package server

import "github.com/julienschmidt/httprouter"

// routes is the one place where the API's routes are wired.
func (s *Server) routes(r *httprouter.Router) {
	r.GET("/v1/lines", s.api("lines:read", s.listLines))
	r.GET("/v1/chats", s.api("chats:read", s.listChats))
	r.GET("/v1/messages", s.api("messages:read", s.listMessages))
	r.POST("/v1/messages", s.api("messages:write", s.sendMessage))
	r.GET("/v1/outbox", s.api("outbox:read", s.getOutboxItem))
}
