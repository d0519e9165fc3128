// Package admin serves the admin socket: the host's operator's commands
// (keys, the simulated network, sandboxes, webhooks' deliveries, the
// console's sign-in, backups) and the API as the host, for the command line
// on this host. The socket itself, and who may reach it, is package
// adminsock; the shapes are in api; the client is adminsock.Client.
package admin

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"

	"github.com/julienschmidt/httprouter"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/storage"
)

// Admin serves the admin socket.
type Admin struct {
	db   *storage.DB
	api  API
	opts Options
	log  *slog.Logger
}

// API is what the admin commands need of the API's own rules and shapes,
// so that what they make reads as the API would show it.
type API interface {
	// Message is m as the API shows it.
	Message(m storage.Message) api.Message
	// FindMessage is the message of line that value (an ID or a GUID)
	// names; param names the parameter in the refusal.
	FindMessage(r *http.Request, line storage.Line, value, param string) (storage.Message, error)
	// Reaction is r as the API shows it.
	Reaction(r storage.Reaction) api.Reaction
	// ChatEventData is a change of a chat as the API's events show it.
	ChatEventData(u storage.ChatUpdate, lineHandle string) api.ChatEventData
	// Sandbox is an owner's sandbox state as the API shows it.
	Sandbox(ctx context.Context, line storage.Line, st storage.SandboxState, started bool) (api.Sandbox, error)
	// EventData is the data of an event as webhooks receive it.
	EventData(d storage.Delivery, lineHandle string) (json.RawMessage, error)
	// ForgetAvailability drops the kept answers of whether handle is on
	// iMessage.
	ForgetAvailability(handle string)
}

// Inbound stores what a simulated contact sends or changes, as a bridge
// reports it.
type Inbound interface {
	Record(ctx context.Context, in bridge.Inbound) (storage.InboundResult, error)
	RecordReaction(ctx context.Context, in bridge.InboundReaction) (storage.Reaction, bool, error)
	RecordUpdate(ctx context.Context, u bridge.MessageUpdate) (storage.Message, []string, error)
	RecordChatUpdate(ctx context.Context, u bridge.ChatUpdate) (storage.ChatUpdate, bool, error)
	RecordTyping(ctx context.Context, in bridge.InboundTyping) (storage.Indicator, error)
}

// Simulator makes the simulated network's chats and message GUIDs.
type Simulator interface {
	OneToOne(service, contact string) bridge.Chat
	NewGroup(service, name string, participants []string) bridge.Chat
	NewGUID() string
}

// Dashboard hands out the console's sign-ins.
type Dashboard interface {
	// LoginLink returns a one-time link that signs its opener in as
	// owner ("" for the host's operator) until expiresAt (Unix ms).
	LoginLink(ctx context.Context, owner string) (link string, expiresAt int64, err error)
	// SetPassword sets the password for signing in without a link over
	// TLS; "" removes it.
	SetPassword(ctx context.Context, password string) error
}

// Options are the parts the admin commands act through.
type Options struct {
	// API is the API's handler as the host's operator (server.AsHost):
	// the command line's client commands, listen and mcp on this host.
	API http.Handler
	// Inbound records what the sim commands make a contact send.
	Inbound Inbound
	// Simulator names the sim commands' chats and messages; nil refuses
	// them.
	Simulator Simulator
	// SimAvailability sets a handle's answer on the simulated network;
	// nil refuses.
	SimAvailability func(handle string, imessage bool)
	// WebhookTester sends `blueline webhooks test` events; nil refuses.
	WebhookTester WebhookTester
	// Dashboard is the console's sign-in; nil when the console is off.
	Dashboard Dashboard
	// Metrics is served at GET /metrics; nil serves none.
	Metrics http.Handler
	// Fleet reports the fleet this host is a node of (GET /fleet); nil
	// without [fleet].
	Fleet func(ctx context.Context) (api.FleetStatus, error)
	// FleetLines finds the lines of a fleet's other hosts, for keys
	// limited to them; nil without a fleet.
	FleetLines FleetLines
}

// FleetLines are the lines of a fleet's other hosts (its line directory).
type FleetLines interface {
	// LineByHandle is the ID of the line with this handle (normalized).
	LineByHandle(ctx context.Context, handle string) (id string, ok bool)
	// LineHandle is the handle of the line with this ID.
	LineHandle(ctx context.Context, id string) (handle string, ok bool)
}

// New is the admin socket's handlers over db.
func New(db *storage.DB, apiRules API, opts Options, log *slog.Logger) *Admin {
	return &Admin{db: db, api: apiRules, opts: opts, log: log}
}

// Handler serves the admin socket.
func (a *Admin) Handler() http.Handler {
	r := httprouter.New()
	a.routes(r)
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		httpapi.WriteError(w, req, a.log, httpapi.NotFound("route_not_found", "", "No admin route %s %s.", req.Method, req.URL.Path))
	})
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		id := httpapi.NewRequestID()
		w.Header().Set("X-Request-Id", id)
		r.ServeHTTP(w, req.WithContext(httpapi.WithRequestID(req.Context(), id)))
	})
}

// answer adapts h to the router; an error it returns is answered in the
// spec's shape.
func answer(log *slog.Logger, h func(w http.ResponseWriter, r *http.Request) error) httprouter.Handle {
	return func(w http.ResponseWriter, r *http.Request, _ httprouter.Params) {
		if err := h(w, r); err != nil {
			httpapi.WriteError(w, r, log, err)
		}
	}
}

// routes is the one place where the admin socket's routes are wired.
// Only the daemon's user can reach the socket (package adminsock), so its
// handles need no API key and have no rate limit.
func (a *Admin) routes(r *httprouter.Router) {
	r.POST("/keys", answer(a.log, a.adminCreateKey))
	r.GET("/keys", answer(a.log, a.adminListKeys))
	r.POST("/keys/revoke", answer(a.log, a.adminRevokeKey))
	r.POST("/sim/inbound", answer(a.log, a.adminSimInbound))
	r.POST("/sim/owner-send", answer(a.log, a.adminSimOwnerSend))
	r.POST("/sim/reaction", answer(a.log, a.adminSimReaction))
	r.POST("/sim/typing", answer(a.log, a.adminSimTyping))
	r.POST("/sim/edit", answer(a.log, a.adminSimEdit))
	r.POST("/sim/unsend", answer(a.log, a.adminSimUnsend))
	r.POST("/sim/read", answer(a.log, a.adminSimRead))
	r.POST("/sim/group", answer(a.log, a.adminSimGroup))
	r.POST("/sim/availability", answer(a.log, a.adminSimAvailability))
	r.GET("/sandbox", answer(a.log, a.adminSandbox))
	r.POST("/sandbox", answer(a.log, a.adminStartSandbox))
	r.GET("/webhooks", answer(a.log, a.adminWebhooks))
	r.GET("/webhooks/attempts", answer(a.log, a.adminAttempts))
	r.POST("/webhooks/redeliver", answer(a.log, a.adminRedeliver))
	r.POST("/webhooks/test", answer(a.log, a.adminTestWebhook))
	r.POST("/dashboard/link", answer(a.log, a.adminDashboardLink))
	r.POST("/dashboard/password", answer(a.log, a.adminDashboardPassword))
	r.GET("/dashboard/sessions", answer(a.log, a.adminDashboardSessions))
	r.POST("/dashboard/sessions/end", answer(a.log, a.adminDashboardSignOut))
	r.GET("/fleet", answer(a.log, a.fleetStatus))
	r.GET("/backup", a.adminBackup)
	// The API itself, for the host's own tools (the command line's client
	// commands, listen, mcp): as the host's operator, or as the owner the
	// Blueline-Owner header names.
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
		r.Handler(m, "/v1/*path", a.opts.API)
	}
	if a.opts.Metrics != nil {
		r.Handler(http.MethodGet, "/metrics", a.opts.Metrics)
	}
}
