package server

// routes is the one place where the API's routes are wired.
func (s *Server) routes(r patternRouter) {
	r.GET("/v1/lines", s.api("lines:read", s.listLines))
	r.GET("/v1/chats", s.api("chats:read", s.listChats))
	r.GET("/v1/messages", s.api("messages:read", s.listMessages))
	r.GET("/v1/messages/search", s.api("messages:read", s.searchMessages))
	r.POST("/v1/messages", s.api("messages:write", s.sendMessage))
	r.POST("/v1/audio-messages", s.api("messages:write", s.sendAudio("audio_message")))
	r.POST("/v1/voice-notes", s.api("messages:write", s.sendAudio("voice_note")))
	r.GET("/v1/reactions", s.api("reactions:read", s.listReactions))
	r.POST("/v1/reactions", s.api("reactions:write", s.sendReaction))
	r.GET("/v1/typing", s.api("typing:read", s.listTyping))
	r.POST("/v1/typing", s.api("typing:write", s.sendTyping))
	r.GET("/v1/receipts", s.api("receipts:read", s.listReceipts))
	r.POST("/v1/receipts", s.api("receipts:write", s.sendReceipt))
	r.GET("/v1/outbox", s.api("outbox:read", s.getOutboxItem))
	// Beyond the reference: changing what the line sent, group chats, and
	// whether a handle is on iMessage.
	r.POST("/v1/edits", s.api("messages:write", s.sendEdit))
	r.POST("/v1/unsends", s.api("messages:write", s.sendUnsend))
	r.POST("/v1/groups", s.api("messages:write", s.createGroup))
	r.POST("/v1/groups/rename", s.api("messages:write", s.renameGroup))
	r.POST("/v1/groups/participants", s.api("messages:write", s.changeGroupMembers))
	r.POST("/v1/groups/leave", s.api("messages:write", s.leaveGroup))
	r.GET("/v1/availability", s.api("messages:read", s.getAvailability))
	r.POST("/v1/outbox/cancel", s.api("messages:write", s.cancelOutboxItem))
	// Agent keys' drafts waiting for the owner's approval, and the owner's
	// answer.
	r.GET("/v1/outbox/waiting", s.api("outbox:read", s.listWaiting))
	r.POST("/v1/outbox/approve", s.api("messages:write", s.approveOutboxItem))
	r.POST("/v1/outbox/decline", s.api("messages:write", s.declineOutboxItem))
	// A line's blocked contacts, as JSON pages or CSV: read with the chats,
	// changed with what the line sends.
	r.GET("/v1/contacts/blocked", s.api("chats:read", s.listBlocked))
	r.GET("/v1/contacts/blocked.csv", s.api("chats:read", s.exportBlocked))
	r.POST("/v1/contacts/blocked", s.api("messages:write", s.blockContact))
	r.POST("/v1/contacts/blocked.csv", s.api("messages:write", s.importBlocked))
	r.DELETE("/v1/contacts/blocked/:handle", s.api("messages:write", s.unblockContact))
	// The contacts opted out of a line's messages, read with the chats.
	r.GET("/v1/contacts/opted-out", s.api("chats:read", s.listOptedOut))
	// Agents on a line: chat leases, and the owner giving a chat they took
	// over back to the agents.
	r.POST("/v1/chats/lease", s.api("messages:write", s.leaseChat))
	r.DELETE("/v1/chats/lease", s.api("messages:write", s.releaseChat))
	r.POST("/v1/chats/resume", s.api("messages:write", s.resumeAgents))
	// The key owner's own sandbox: any key with an owner, whatever its
	// scopes, as the reference's CLI expects.
	r.GET("/v1/sandbox", s.api(anyScope, s.getSandbox))
	r.POST("/v1/sandbox", s.api(anyScope, s.startSandbox))
	r.GET("/v1/webhooks", s.api("webhooks:read", s.listWebhooks))
	// What webhooks receive, streamed (server-sent events): `listen`.
	r.GET("/v1/events", s.api("webhooks:read", s.streamEvents))
	r.POST("/v1/webhooks", s.api("webhooks:write", s.createWebhook))
	r.DELETE("/v1/webhooks", s.api("webhooks:write", s.deleteWebhook))
	r.GET("/v1/files", s.api("files:read", s.getFile))
	r.POST("/v1/files", s.api("files:write", s.uploadFile))
	// Signed download URLs carry their own credential: no API key.
	r.GET("/files/:id", s.downloadFile)
	r.HEAD("/files/:id", s.downloadFile)
	// Health for load balancers and supervisors: no API key, no rate
	// limit, no data.
	r.GET("/healthz", s.healthz)
	r.HEAD("/healthz", s.healthz)
	r.GET("/readyz", s.readyz)
	r.HEAD("/readyz", s.readyz)
	// The API's own description (OpenAPI 3.1): public, like the API's
	// documentation.
	r.GET("/v1/openapi.json", s.openAPIDocument)
}
