package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/julienschmidt/httprouter"

	"github.com/blueline-app/blueline/api"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/mediatype"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

// AdminHandler serves the admin socket.
func (s *Server) AdminHandler() http.Handler {
	r := httprouter.New()
	s.adminRoutes(r)
	r.NotFound = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		writeError(w, req, s.log, errNotFound("route_not_found", "", "No admin route %s %s.", req.Method, req.URL.Path))
	})
	return s.withRequestID(r, nil)
}

// KeyRequest asks for a new API key.
type KeyRequest struct {
	Label  string   `json:"label"`
	Scopes string   `json:"scopes"` // "all" or comma-separated
	Lines  []string `json:"lines"`  // handles or line IDs; empty: every line
	Owner  string   `json:"owner"`
}

// KeyInfo describes a key; Secret is set only when the key is created.
type KeyInfo struct {
	ID        string   `json:"id"`
	Secret    string   `json:"key,omitempty"`
	Hint      string   `json:"hint"` // sk_live_…wXyZ; "" for keys made before hints
	Label     string   `json:"label"`
	Scopes    []string `json:"scopes"`
	Lines     []string `json:"lines"` // handles
	Owner     string   `json:"owner"`
	CreatedAt int64    `json:"created_at"`
	// LastUsedAt is when the key last made a request, to the minute; 0
	// for never.
	LastUsedAt int64 `json:"last_used_at"`
}

func (s *Server) keyInfo(k storage.Key) KeyInfo {
	info := KeyInfo{ID: k.ID, Hint: k.Hint, Label: k.Label, Scopes: k.Scopes, Lines: []string{}, Owner: k.Owner, CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt}
	for _, id := range k.LineIDs {
		if l, ok := s.db.LineByID(id); ok {
			info.Lines = append(info.Lines, l.Handle)
		} else {
			info.Lines = append(info.Lines, id)
		}
	}
	return info
}

func decodeAdmin(r *http.Request, v any) error {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v); err != nil {
		return errInvalidRequest("invalid_json", "", "The request body is not valid JSON: %v", err)
	}
	return nil
}

func (s *Server) adminCreateKey(w http.ResponseWriter, r *http.Request) error {
	var req KeyRequest
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	req.Label, req.Owner = strings.TrimSpace(req.Label), strings.TrimSpace(req.Owner)
	if req.Label == "" {
		return errMissing("label")
	}
	// keys list prints one key per line, fields separated by tabs.
	if strings.ContainsFunc(req.Label+req.Owner, unicode.IsControl) {
		return errInvalid("label", "Label and owner may not contain tabs, newlines or other control characters.")
	}
	scopes, err := ParseScopes(req.Scopes)
	if err != nil {
		return errInvalid("scopes", "%v", err)
	}
	var lineIDs []string
	for _, v := range req.Lines {
		v = strings.TrimSpace(v)
		l, ok := s.db.LineByID(v)
		if !ok && !strings.HasPrefix(v, "ln_") {
			h, err := handle.Normalize(v)
			if err != nil {
				return errHandle("lines", v, err)
			}
			l, ok = s.db.LineByHandle(h)
		}
		if !ok {
			return errNotFound("line_not_found", "lines", "No line %q on this server.", v)
		}
		lineIDs = append(lineIDs, l.ID)
	}
	secret, hash := newKeySecret()
	k := storage.Key{ID: storage.NewID("key_"), Label: req.Label, Scopes: scopes, LineIDs: lineIDs,
		Owner: req.Owner, Hint: keyPrefix + "…" + secret[len(secret)-4:], Hash: hash, CreatedAt: time.Now().UnixMilli()}
	if err := s.db.CreateKey(r.Context(), k); err != nil {
		return err
	}
	s.log.Info("API key created", "key_id", k.ID, "label", k.Label)
	info := s.keyInfo(k)
	info.Secret = secret
	writeJSON(w, http.StatusCreated, info)
	return nil
}

func (s *Server) adminListKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := s.db.Keys(r.Context())
	if err != nil {
		return err
	}
	out := make([]KeyInfo, len(keys))
	for i, k := range keys {
		out[i] = s.keyInfo(k)
	}
	writeJSON(w, http.StatusOK, newList(r.Context(), out, nil))
	return nil
}

func (s *Server) adminRevokeKey(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	err := s.db.RevokeKey(r.Context(), req.ID)
	if errors.Is(err, storage.ErrNotFound) {
		return errNotFound("key_not_found", "id", "No active key %q.", req.ID)
	}
	if err != nil {
		return err
	}
	s.log.Info("API key revoked", "key_id", req.ID)
	writeJSON(w, http.StatusOK, map[string]any{"id": req.ID, "revoked": true, "request_id": requestID(r.Context())})
	return nil
}

// SimInbound is a message a simulated contact sends to a line.
type SimInbound struct {
	Line         string   `json:"line"`
	From         string   `json:"from"`
	Text         string   `json:"text"`
	Chat         string   `json:"chat"`         // an existing chat (cht_…)
	Group        string   `json:"group"`        // name of a new group chat
	Participants []string `json:"participants"` // members of the new group
	// Attach is the absolute path of a file to attach (a picture, a .vcf
	// contact card…); Audio, of a voice memo, with its Transcription.
	Attach        string  `json:"attach"`
	Audio         string  `json:"audio"`
	Transcription *string `json:"transcription"`
}

// simLine resolves the line of a simulated event: it must be on the
// simulated network.
func (s *Server) simLine(value string) (storage.Line, error) {
	lh, err := handle.Normalize(value)
	if err != nil {
		return storage.Line{}, errHandle("line", value, err)
	}
	line, ok := s.db.LineByHandle(lh)
	if !ok {
		return line, errNotFound("line_not_found", "line", "No line %s on this server.", value)
	}
	if line.Bridge != "sim" {
		return line, errInvalid("line", "Line %s is on the %s bridge, not the simulated network.", line.Handle, line.Bridge)
	}
	if s.opts.Simulator == nil {
		return line, errUnavailable("simulator_unavailable", "The simulated network does not take commands on this server.")
	}
	return line, nil
}

// simContact resolves the line and contact of a simulated event.
func (s *Server) simContact(lineValue, fromValue string) (storage.Line, string, error) {
	line, err := s.simLine(lineValue)
	if err != nil {
		return line, "", err
	}
	from, err := handle.Normalize(fromValue)
	if err != nil {
		return line, "", errHandle("from", fromValue, err)
	}
	if from == line.Handle {
		return line, "", errInvalid("from", "A contact cannot have the line's own handle.")
	}
	return line, from, nil
}

// simChat is the existing chat chatID, which contact from must be in, or
// else the one-to-one chat with from.
func (s *Server) simChat(r *http.Request, line storage.Line, from, chatID string) (bridge.Chat, error) {
	if chatID == "" {
		return s.opts.Simulator.OneToOne(line.Service, from), nil
	}
	c, err := s.lineChat(r, line, chatID)
	if err != nil {
		return bridge.Chat{}, err
	}
	if !c.IsGroup && c.Identifier != from {
		return bridge.Chat{}, errInvalid("chat", "Chat %s is a one-to-one chat with %s.", c.ID, c.Identifier)
	}
	return bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: c.IsGroup, Participants: []string{from}}, nil
}

// lineChat is the stored chat chatID of line.
func (s *Server) lineChat(r *http.Request, line storage.Line, chatID string) (storage.Chat, error) {
	c, err := s.db.ChatByID(r.Context(), chatID)
	if errors.Is(err, storage.ErrNotFound) || err == nil && c.LineID != line.ID {
		return c, errNotFound("chat_not_found", "chat", "No chat %s on line %s.", chatID, line.Handle)
	}
	return c, err
}

func (s *Server) adminSimInbound(w http.ResponseWriter, r *http.Request) error {
	var req SimInbound
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, from, err := s.simContact(req.Line, req.From)
	if err != nil {
		return err
	}
	in := bridge.Inbound{Line: line.Handle, Service: line.Service, GUID: s.opts.Simulator.NewGUID(), Sender: from, SentAt: time.Now()}
	switch {
	case req.Attach != "" && req.Audio != "":
		return errInvalid("audio", "Give --attach or --audio, not both: a message carries one attachment.")
	case req.Transcription != nil && req.Audio == "":
		return errInvalid("transcription", "--transcription goes with --audio.")
	case req.Attach != "":
		in.Attachments = []bridge.File{{Path: req.Attach}}
	case req.Audio != "":
		if !mediatype.IsAudio(mediatype.ByName(req.Audio)) {
			return errInvalid("audio", "--audio needs an audio file (.m4a, .caf, .mp3, .wav, .aac, .amr), got %s.", filepath.Base(req.Audio))
		}
		in.Attachments = []bridge.File{{Path: req.Audio, Transcription: req.Transcription}}
		in.IsAudioMessage = true
	case req.Text == "":
		return errMissing("text")
	}
	if req.Text != "" {
		in.Text = &req.Text
	}
	switch {
	case req.Chat != "" && req.Group != "":
		return errInvalid("chat", "Give --chat for an existing chat or --group for a new one, not both.")
	case req.Group != "":
		members := []string{}
		for _, p := range req.Participants {
			h, err := handle.Normalize(p)
			if err != nil {
				return errHandle("participants", p, err)
			}
			if h == line.Handle {
				return errInvalid("participants", "Participant %q is the line itself, not a contact.", p)
			}
			members = append(members, h)
		}
		if len(members) == 0 {
			return errMissing("participants")
		}
		in.Chat = s.opts.Simulator.NewGroup(line.Service, req.Group, members)
	default:
		if in.Chat, err = s.simChat(r, line, from, req.Chat); err != nil {
			return err
		}
	}
	res, err := s.inbound.Record(r.Context(), in)
	if errors.Is(err, fs.ErrNotExist) {
		return errInvalid("attach", "No file at %s.", in.Attachments[0].Path)
	}
	if err != nil {
		return err
	}
	if res.SandboxActivated {
		s.log.Info("sandbox line activated", "line", line.Handle, "paired_handle", from)
	}
	writeJSON(w, http.StatusCreated, s.toAPIMessage(res.Message))
	return nil
}

// SimReaction is a tapback a simulated contact adds or removes.
type SimReaction struct {
	Line    string `json:"line"`
	From    string `json:"from"`
	Message string `json:"message"` // msg_ ID or GUID
	Type    string `json:"type"`
	// Emoji is the tapback's emoji, with Type bridge.ReactionEmoji.
	Emoji  string `json:"emoji"`
	Remove bool   `json:"remove"`
}

func (s *Server) adminSimReaction(w http.ResponseWriter, r *http.Request) error {
	var req SimReaction
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, from, err := s.simContact(req.Line, req.From)
	if err != nil {
		return err
	}
	// Contacts may send the tapbacks of recent Apple systems, which lines
	// only receive.
	switch {
	case req.Type != bridge.ReactionEmoji && req.Type != bridge.ReactionSticker && !slices.Contains(bridge.ReactionTypes, req.Type):
		return errInvalid("type", "--type must be one of %s, %s or %s.", strings.Join(bridge.ReactionTypes, ", "), bridge.ReactionEmoji, bridge.ReactionSticker)
	case req.Type == bridge.ReactionEmoji && req.Emoji == "":
		return errMissing("emoji")
	case req.Type != bridge.ReactionEmoji && req.Emoji != "":
		return errInvalid("emoji", "--emoji goes with --type %s.", bridge.ReactionEmoji)
	}
	m, err := s.findMessage(r, line, req.Message, "message")
	if err != nil {
		return err
	}
	c, err := s.db.ChatByID(r.Context(), m.ChatID)
	if err != nil {
		return err
	}
	if !slices.Contains(c.Participants, from) {
		return errInvalid("from", "%s is not in the chat of message %s.", from, req.Message)
	}
	rec, _, err := s.inbound.RecordReaction(r.Context(), bridge.InboundReaction{
		Line: line.Handle, Chat: bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: c.IsGroup},
		TargetGUID: m.GUID, Type: req.Type, Emoji: req.Emoji, Added: !req.Remove, Sender: from, SentAt: time.Now(),
	})
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, toAPIReaction(rec))
	return nil
}

// SimTyping is a simulated contact starting or stopping typing.
type SimTyping struct {
	Line  string `json:"line"`
	From  string `json:"from"`
	Chat  string `json:"chat"`  // a group chat (cht_…); default the one-to-one chat
	State string `json:"state"` // "on" or "off"
}

func (s *Server) adminSimTyping(w http.ResponseWriter, r *http.Request) error {
	var req SimTyping
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, from, err := s.simContact(req.Line, req.From)
	if err != nil {
		return err
	}
	if req.State != "on" && req.State != "off" {
		return errInvalid("state", "--state must be on or off.")
	}
	chat, err := s.simChat(r, line, from, req.Chat)
	if err != nil {
		return err
	}
	ind, err := s.inbound.RecordTyping(r.Context(), bridge.InboundTyping{Line: line.Handle, Chat: chat, Sender: from, On: req.State == "on", At: time.Now()})
	if errors.Is(err, storage.ErrNotFound) {
		return errNotFound("chat_not_found", "chat", "%s has no chat with line %s yet: send a message first.", from, line.Handle)
	}
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusCreated, api.Indicator(ind))
	return nil
}

// SimEdit is a simulated contact editing the text of a message it sent.
type SimEdit struct {
	Line    string `json:"line"`
	From    string `json:"from"`
	Message string `json:"message"` // msg_ ID or GUID
	Text    string `json:"text"`
}

func (s *Server) adminSimEdit(w http.ResponseWriter, r *http.Request) error {
	var req SimEdit
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, m, err := s.simOwnMessage(r, req.Line, req.From, req.Message)
	if err != nil {
		return err
	}
	switch {
	case req.Text == "":
		return errMissing("text")
	case m.Text == nil:
		return errInvalid("message", "Message %s has no text to edit.", req.Message)
	}
	// Storage takes an edit no later than the last one for old news: two
	// edits within a millisecond must still both count.
	at := time.Now()
	if at.UnixMilli() <= m.EditedAt {
		at = time.UnixMilli(m.EditedAt + 1)
	}
	return s.simUpdate(w, r, bridge.MessageUpdate{Line: line.Handle, GUID: m.GUID, Text: &req.Text, EditedAt: at})
}

// SimUnsend is a simulated contact taking back a message it sent.
type SimUnsend struct {
	Line    string `json:"line"`
	From    string `json:"from"`
	Message string `json:"message"` // msg_ ID or GUID
}

func (s *Server) adminSimUnsend(w http.ResponseWriter, r *http.Request) error {
	var req SimUnsend
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, m, err := s.simOwnMessage(r, req.Line, req.From, req.Message)
	if err != nil {
		return err
	}
	return s.simUpdate(w, r, bridge.MessageUpdate{Line: line.Handle, GUID: m.GUID, UnsentAt: time.Now()})
}

// simOwnMessage is a message that contact fromValue sent to the line and
// has not unsent: what a contact can still edit or unsend.
func (s *Server) simOwnMessage(r *http.Request, lineValue, fromValue, message string) (storage.Line, storage.Message, error) {
	line, from, err := s.simContact(lineValue, fromValue)
	if err != nil {
		return line, storage.Message{}, err
	}
	if message == "" {
		return line, storage.Message{}, errMissing("message")
	}
	m, err := s.findMessage(r, line, message, "message")
	switch {
	case err != nil:
		return line, m, err
	case m.IsFromMe || m.Sender != from:
		return line, m, errInvalid("from", "Message %s was sent by %s, not %s: a contact changes only its own messages.", message, m.Sender, from)
	case m.UnsentAt != 0:
		return line, m, errInvalid("message", "Message %s was unsent: it can no longer change.", message)
	}
	return line, m, nil
}

// SimRead is a simulated contact reading what the line sent in their
// one-to-one chat.
type SimRead struct {
	Line string `json:"line"`
	From string `json:"from"`
	// Message is the line's message read (msg_ ID or GUID); by default the
	// line's latest message in the chat.
	Message string `json:"message"`
	// DeliveredOnly has the message reach the contact's device, unread.
	DeliveredOnly bool `json:"delivered_only"`
}

func (s *Server) adminSimRead(w http.ResponseWriter, r *http.Request) error {
	var req SimRead
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, from, err := s.simContact(req.Line, req.From)
	if err != nil {
		return err
	}
	var m storage.Message
	if req.Message == "" {
		m, err = s.latestSent(r, line, from)
	} else {
		m, err = s.sentTo(r, line, from, req.Message)
	}
	if err != nil {
		return err
	}
	// A message read was delivered first; storage keeps an earlier
	// delivery time.
	now := time.Now()
	u := bridge.MessageUpdate{Line: line.Handle, GUID: m.GUID, DeliveredAt: now}
	if !req.DeliveredOnly {
		u.ReadAt = now
	}
	return s.simUpdate(w, r, u)
}

// sentTo is the line's message given as value (msg_ ID or GUID), which the
// line must have sent in its one-to-one chat with contact.
func (s *Server) sentTo(r *http.Request, line storage.Line, contact, value string) (storage.Message, error) {
	m, err := s.findMessage(r, line, value, "message")
	if err != nil {
		return m, err
	}
	if !m.IsFromMe {
		return m, errInvalid("message", "Message %s was sent by %s: a contact reads the line's messages.", value, m.Sender)
	}
	c, err := s.db.ChatByID(r.Context(), m.ChatID)
	if err != nil {
		return m, err
	}
	if c.IsGroup || c.Identifier != contact {
		return m, errInvalid("message", "Message %s is not in the one-to-one chat of line %s with %s.", value, line.Handle, contact)
	}
	return m, nil
}

// latestSent is the line's latest message in its one-to-one chat with
// contact.
func (s *Server) latestSent(r *http.Request, line storage.Line, contact string) (storage.Message, error) {
	c, err := s.db.ChatByIdentifier(r.Context(), line.ID, contact)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Message{}, errNotFound("chat_not_found", "from", "%s has no chat with line %s yet.", contact, line.Handle)
	}
	if err != nil {
		return storage.Message{}, err
	}
	var after []byte
	for {
		msgs, next, err := s.db.ListMessages(r.Context(), c.ID, after, 100)
		if err != nil {
			return storage.Message{}, err
		}
		for _, m := range msgs {
			if m.IsFromMe {
				return m, nil
			}
		}
		if next == nil {
			return storage.Message{}, errNotFound("message_not_found", "message", "Line %s has sent %s nothing yet.", line.Handle, contact)
		}
		after = next
	}
}

// simUpdate records a simulated change to a message and answers with the
// message as it left it.
func (s *Server) simUpdate(w http.ResponseWriter, r *http.Request, u bridge.MessageUpdate) error {
	m, _, err := s.inbound.RecordUpdate(r.Context(), u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, s.toAPIMessage(m))
	return nil
}

// SimGroup is a change to a group chat, made by a member or by the line's
// owner.
type SimGroup struct {
	Line string `json:"line"`
	Chat string `json:"chat"` // a group chat (cht_…)
	// By is the member who makes the change, or the line's own handle for
	// the line's owner.
	By string `json:"by"`
	// Action is one of the bridge's Chat… changes. Participant is the
	// member added or removed (the one who leaves is By); Name is a renamed
	// chat's new name, "" to clear it.
	Action      string `json:"action"`
	Participant string `json:"participant"`
	Name        string `json:"name"`
}

func (s *Server) adminSimGroup(w http.ResponseWriter, r *http.Request) error {
	var req SimGroup
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, err := s.simLine(req.Line)
	if err != nil {
		return err
	}
	if req.Chat == "" {
		return errMissing("chat")
	}
	c, err := s.lineChat(r, line, req.Chat)
	if err != nil {
		return err
	}
	if !c.IsGroup {
		return errInvalid("chat", "Chat %s is a one-to-one chat with %s: only a group changes members, name or photo.", c.ID, c.Identifier)
	}
	if req.By == "" {
		return errMissing("by")
	}
	by, err := handle.Normalize(req.By)
	if err != nil {
		return errHandle("by", req.By, err)
	}
	member := func(h string) bool { return h == line.Handle || slices.Contains(c.Participants, h) }
	if !member(by) {
		return errInvalid("by", "%s is not a member of chat %s.", by, c.ID)
	}
	add, remove := req.Action == bridge.ChatParticipantAdded, req.Action == bridge.ChatParticipantRemoved
	switch {
	case req.Action == "":
		return errMissing("action")
	case !add && !remove && !slices.Contains([]string{bridge.ChatParticipantLeft, bridge.ChatRenamed, bridge.ChatPhotoChanged, bridge.ChatPhotoRemoved}, req.Action):
		return errInvalid("action", "Unknown action %q: a member is added, removed or leaves, or the group is renamed or its photo changed or removed.", req.Action)
	case req.Participant != "" && !add && !remove:
		return errInvalid("participant", "A participant goes with adding or removing a member; the one who leaves is --by.")
	case req.Name != "" && req.Action != bridge.ChatRenamed:
		return errInvalid("name", "A name goes with renaming the group.")
	}
	u := bridge.ChatUpdate{Line: line.Handle, GUID: s.opts.Simulator.NewGUID(), Action: req.Action, Name: req.Name, By: by, IsFromMe: by == line.Handle, At: time.Now(),
		Chat: bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: true, Name: c.Name, Participants: c.Participants}}
	if add || remove {
		if req.Participant == "" {
			return errMissing("participant")
		}
		p, err := handle.Normalize(req.Participant)
		switch {
		case err != nil:
			return errHandle("participant", req.Participant, err)
		case add && member(p):
			return errInvalid("participant", "%s is already in chat %s.", p, c.ID)
		case remove && !member(p):
			return errInvalid("participant", "%s is not in chat %s.", p, c.ID)
		case remove && p == by:
			return errInvalid("participant", "%s cannot remove itself: it leaves (--leave).", p)
		}
		u.Participant = p
	}
	if req.Action == bridge.ChatParticipantLeft {
		u.Participant = by
	}
	rec, _, err := s.inbound.RecordChatUpdate(r.Context(), u)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, toChatEventData(rec, line.Handle))
	return nil
}

// WebhookInfo is a webhook as `blueline webhooks list` shows it.
type WebhookInfo struct {
	ID           string   `json:"id"`
	Line         string   `json:"line"`
	URL          string   `json:"url"`
	Events       []string `json:"events"`
	IsActive     bool     `json:"is_active"`
	FailingSince int64    `json:"failing_since"`
	CreatedAt    int64    `json:"created_at"`
}

func (s *Server) adminWebhooks(w http.ResponseWriter, r *http.Request) error {
	hooks, err := s.db.Webhooks(r.Context(), "")
	if err != nil {
		return err
	}
	out := make([]WebhookInfo, len(hooks))
	for i, h := range hooks {
		line, _ := s.db.LineByID(h.LineID)
		out[i] = WebhookInfo{ID: h.ID, Line: line.Handle, URL: h.URL, Events: h.Events, IsActive: h.IsActive,
			FailingSince: h.FailingSince, CreatedAt: h.CreatedAt}
	}
	writeJSON(w, http.StatusOK, newList(r.Context(), out, nil))
	return nil
}

// adminAttempts lists recent delivery attempts, newest first, optionally of
// one webhook or one delivery.
func (s *Server) adminAttempts(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := storage.AttemptFilter{WebhookID: q.Get("webhook"), DeliveryID: q.Get("delivery"), Limit: 50}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return errInvalid("limit", "--limit must be a number from 1 to 10000.")
		}
		f.Limit = n
	}
	attempts, err := s.db.Attempts(r.Context(), f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, newList(r.Context(), attempts, nil))
	return nil
}

func (s *Server) adminRedeliver(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	d, err := s.db.Redeliver(r.Context(), req.ID)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return errNotFound("delivery_not_found", "id", "No delivery %q (deliveries are kept for the [webhooks] retention).", req.ID)
	case errors.Is(err, storage.ErrWebhookInactive):
		return errInvalid("id", "Webhook %s of delivery %s is inactive; register it again to receive events.", d.WebhookID, req.ID)
	case err != nil:
		return err
	}
	s.log.Info("webhook delivery queued again", "delivery_id", d.ID, "webhook_id", d.WebhookID)
	writeJSON(w, http.StatusOK, map[string]any{"id": d.ID, "status": d.Status, "request_id": requestID(r.Context())})
	return nil
}

// WebhookTester sends a test event to a webhook's receiver, signed and
// posted as a delivery is, and recorded nowhere.
type WebhookTester interface {
	Send(ctx context.Context, hook storage.Webhook, event string, data json.RawMessage) webhook.TestResult
}

// WebhookTestRequest asks for a test event; Event "" is the webhook's first.
type WebhookTestRequest struct {
	ID    string `json:"id"`
	Event string `json:"event"`
}

// adminTestWebhook sends a webhook a test event of a type it subscribes to,
// with sample data in the event's real shape, and answers what its receiver
// made of it. A receiver's failure is an answer, not an error of ours.
func (s *Server) adminTestWebhook(w http.ResponseWriter, r *http.Request) error {
	var req WebhookTestRequest
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	if s.opts.WebhookTester == nil {
		return errors.New("this daemon cannot send webhook test events")
	}
	h, err := s.db.WebhookByID(r.Context(), req.ID)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return errNotFound("webhook_not_found", "id", "No webhook %q; `blueline webhooks list` lists them.", req.ID)
	case err != nil:
		return err
	}
	event := req.Event
	switch {
	case event == "" && len(h.Events) > 0:
		event = h.Events[0]
	case !slices.Contains(h.Events, event):
		return errInvalid("event", "Webhook %s does not subscribe to %q; it subscribes to %s.", h.ID, event, strings.Join(h.Events, ", "))
	}
	line, _ := s.db.LineByID(h.LineID)
	data, err := s.EventData(sampleDelivery(event, line, s.now().UnixMilli()), line.Handle)
	if err != nil {
		return err
	}
	res := s.opts.WebhookTester.Send(r.Context(), h, event, data)
	s.log.Info("webhook test event sent", "webhook_id", h.ID, "event", event, "status", res.StatusCode, "err", res.Error)
	writeJSON(w, http.StatusOK, res)
	return nil
}

// sampleID is an ID of the right kind and shape whose body starts with
// "test", so that a receiver can tell a test event's records apart.
func sampleID(prefix string) string {
	return prefix + "test" + storage.NewID(prefix)[len(prefix)+len("test"):]
}

// sampleDelivery is a made-up delivery of event on line, at now, whose
// records carry IDs of the right kind and shape (sampleID).
func sampleDelivery(event string, line storage.Line, now int64) storage.Delivery {
	const contact = "+15555550100"
	text := "Test event from Blueline"
	chat := storage.Chat{ID: sampleID("cht_"), LineID: line.ID, GUID: "iMessage;+;chat_test", Identifier: "chat_test",
		Service: line.Service, Name: "Blueline test", IsGroup: true, Participants: []string{contact},
		HasReceivedInbound: true, LastMessageAt: now, CreatedAt: now}
	msg := storage.Message{ID: sampleID("msg_"), LineID: line.ID, ChatID: chat.ID, GUID: sampleID("guid_"),
		Sender: contact, Text: &text, Service: line.Service, SentAt: now, SyncedAt: now}
	d := storage.Delivery{ID: sampleID("dlv_"), LineID: line.ID, ChatID: chat.ID, Event: event, CreatedAt: now}
	switch event {
	case api.EventReactionAdded, api.EventReactionRemoved:
		d.Reaction = &storage.Reaction{ID: sampleID("rxn_"), MessageID: msg.ID, ChatID: chat.ID, LineID: line.ID, Type: "love",
			Sender: contact, Added: event == api.EventReactionAdded, SentAt: now, SyncedAt: now}
	case api.EventReceiptRead:
		d.Receipt = &storage.Receipt{ID: sampleID("rcp_"), ChatID: chat.ID, Handle: contact, LastReadAt: now, SyncedAt: now}
	case api.EventChatUpdated:
		d.ChatUpdate = &storage.ChatUpdate{Chat: chat, Action: bridge.ChatRenamed, Name: chat.Name, By: contact, At: now}
	default:
		switch event {
		case api.EventMessageSent, api.EventMessageFailed, api.EventMessageDelivered:
			msg.Sender, msg.IsFromMe = line.Handle, true
		}
		switch event {
		case api.EventMessageFailed:
			msg.FailedAt, msg.Error = now, "Not Delivered (test)"
		case api.EventMessageEdited:
			msg.EditedAt = now
		case api.EventMessageUnsent:
			msg.UnsentAt, msg.Text = now, nil
		case api.EventMessageDelivered:
			msg.DeliveredAt = now
		}
		d.Message = &msg
	}
	return d
}
