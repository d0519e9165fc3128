package admin

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

	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/server"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/mediatype"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/webhook"
)

func (a *Admin) keyInfo(ctx context.Context, k storage.Key) api.KeyInfo {
	info := api.KeyInfo{ID: k.ID, Hint: k.Hint, Label: k.Label, Scopes: k.Scopes, Lines: []string{}, Owner: k.Owner, Agent: k.Agent, CreatedAt: k.CreatedAt,
		LastUsedAt: k.LastUsedAt, Approval: api.ApprovalNone, ApprovalExcept: []string{},
		AllowFrom: append([]string{}, k.AllowFrom...), GroupMention: k.GroupMention}
	if k.ApprovalRequired {
		info.Approval, info.ApprovalExcept = api.ApprovalRequired, slices.Clone(k.ApprovalExcept)
	}
	for _, id := range k.LineIDs {
		if l, ok := a.db.LineByID(id); ok {
			info.Lines = append(info.Lines, l.Handle)
		} else if h, ok := a.fleetLineHandle(ctx, id); ok {
			info.Lines = append(info.Lines, h)
		} else {
			info.Lines = append(info.Lines, id)
		}
	}
	return info
}

func decodeAdmin(r *http.Request, v any) error {
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(v); err != nil {
		return httpapi.InvalidRequest("invalid_json", "", "The request body is not valid JSON: %v", err)
	}
	return nil
}

// keyApproval reads a new key's approval settings: only an agent's key
// may require approval, and only then name contacts exempt from it.
func keyApproval(req api.KeyRequest) (bool, []string, error) {
	switch req.Approval {
	case "", api.ApprovalNone:
		if strings.TrimSpace(strings.Join(req.ApprovalExcept, "")) != "" {
			return false, nil, httpapi.Invalid("approval_except", "approval_except lists contacts exempt from approval, but the key's approval is not %q.", api.ApprovalRequired)
		}
		return false, nil, nil
	case api.ApprovalRequired:
	default:
		return false, nil, httpapi.Invalid("approval", "approval must be %q or %q, got %q.", api.ApprovalRequired, api.ApprovalNone, req.Approval)
	}
	if !req.Agent {
		return false, nil, httpapi.Invalid("approval", "Only an agent's key (agent: true) can require approval: the owner's own keys are never held back.")
	}
	except := make([]string, 0, len(req.ApprovalExcept))
	for _, v := range req.ApprovalExcept {
		if strings.TrimSpace(v) == "" {
			continue // a form's empty field, or a list's stray comma
		}
		h, err := handle.Normalize(strings.TrimSpace(v))
		if err != nil {
			return false, nil, httpapi.BadHandle("approval_except", v, err)
		}
		except = append(except, h)
	}
	return true, except, nil
}

func (a *Admin) adminCreateKey(w http.ResponseWriter, r *http.Request) error {
	var req api.KeyRequest
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	req.Label, req.Owner = strings.TrimSpace(req.Label), strings.TrimSpace(req.Owner)
	if req.Label == "" {
		return httpapi.Missing("label")
	}
	// keys list prints one key per line, fields separated by tabs.
	if strings.ContainsFunc(req.Label+req.Owner, unicode.IsControl) {
		return httpapi.Invalid("label", "Label and owner may not contain tabs, newlines or other control characters.")
	}
	scopes, err := server.ParseScopes(req.Scopes)
	if err != nil {
		return httpapi.Invalid("scopes", "%v", err)
	}
	approval, except, err := keyApproval(req)
	if err != nil {
		return err
	}
	var lineIDs []string
	for _, v := range req.Lines {
		v = strings.TrimSpace(v)
		l, ok := a.db.LineByID(v)
		if !ok && !strings.HasPrefix(v, "ln_") {
			h, err := handle.Normalize(v)
			if err != nil {
				return httpapi.BadHandle("lines", v, err)
			}
			l, ok = a.db.LineByHandle(h)
			if !ok && a.opts.FleetLines != nil {
				// A line of another host of the fleet.
				l.ID, ok = a.opts.FleetLines.LineByHandle(r.Context(), h)
			}
		} else if !ok && a.opts.FleetLines != nil {
			_, ok = a.opts.FleetLines.LineHandle(r.Context(), v)
			l.ID = v
		}
		if !ok {
			return httpapi.NotFound("line_not_found", "lines", "No line %q on this server%s.", v, a.fleetWord())
		}
		lineIDs = append(lineIDs, l.ID)
	}
	gate, err := keyGate(req)
	if err != nil {
		return err
	}
	k, secret := server.NewKey(storage.Key{Label: req.Label, Scopes: scopes, LineIDs: lineIDs, Owner: req.Owner, Agent: req.Agent,
		ApprovalRequired: approval, ApprovalExcept: except, Gate: gate, CreatedAt: time.Now().UnixMilli()})
	if err := a.db.CreateKey(r.Context(), k); err != nil {
		return err
	}
	a.log.Info("API key created", "key_id", k.ID, "label", k.Label)
	info := a.keyInfo(r.Context(), k)
	info.Secret = secret
	httpapi.WriteJSON(w, http.StatusCreated, info)
	return nil
}

// keyGate is the sender gating a key request asks for: an agent key's
// only, its contacts as handles, its mention a Go regexp.
func keyGate(req api.KeyRequest) (storage.Gate, error) {
	var g storage.Gate
	if len(req.AllowFrom) == 0 && req.GroupMention == "" {
		return g, nil
	}
	if !req.Agent {
		param := "allow_from"
		if len(req.AllowFrom) == 0 {
			param = "group_mention"
		}
		return g, httpapi.Invalid(param, "Sender gating (allow_from, group_mention) is for agent keys: set agent too.")
	}
	for _, v := range req.AllowFrom {
		h, err := handle.Normalize(strings.TrimSpace(v))
		if err != nil {
			return g, httpapi.BadHandle("allow_from", v, err)
		}
		if !slices.Contains(g.AllowFrom, h) {
			g.AllowFrom = append(g.AllowFrom, h)
		}
	}
	if err := storage.ValidMention(req.GroupMention); err != nil {
		return g, httpapi.Invalid("group_mention", "group_mention is not a Go regular expression: %v.", err)
	}
	g.GroupMention = req.GroupMention
	return g, nil
}

func (a *Admin) adminListKeys(w http.ResponseWriter, r *http.Request) error {
	keys, err := a.db.Keys(r.Context())
	if err != nil {
		return err
	}
	out := make([]api.KeyInfo, len(keys))
	for i, k := range keys {
		out[i] = a.keyInfo(r.Context(), k)
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, nil))
	return nil
}

func (a *Admin) adminRevokeKey(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	err := a.db.RevokeKey(r.Context(), req.ID)
	if errors.Is(err, storage.ErrNotFound) {
		return httpapi.NotFound("key_not_found", "id", "No active key %q.", req.ID)
	}
	if err != nil {
		return err
	}
	a.log.Info("API key revoked", "key_id", req.ID)
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"id": req.ID, "revoked": true, "request_id": httpapi.RequestID(r.Context())})
	return nil
}

// simLine resolves the line of a simulated event: it must be on the
// simulated network.
func (a *Admin) simLine(value string) (storage.Line, error) {
	lh, err := handle.Normalize(value)
	if err != nil {
		return storage.Line{}, httpapi.BadHandle("line", value, err)
	}
	line, ok := a.db.LineByHandle(lh)
	if !ok {
		return line, httpapi.NotFound("line_not_found", "line", "No line %s on this server.", value)
	}
	if line.Bridge != "sim" {
		return line, httpapi.Invalid("line", "Line %s is on the %s bridge, not the simulated network.", line.Handle, line.Bridge)
	}
	if a.opts.Simulator == nil {
		return line, httpapi.Unavailable("simulator_unavailable", "The simulated network does not take commands on this server.")
	}
	return line, nil
}

// simContact resolves the line and contact of a simulated event.
func (a *Admin) simContact(lineValue, fromValue string) (storage.Line, string, error) {
	line, err := a.simLine(lineValue)
	if err != nil {
		return line, "", err
	}
	from, err := handle.Normalize(fromValue)
	if err != nil {
		return line, "", httpapi.BadHandle("from", fromValue, err)
	}
	if from == line.Handle {
		return line, "", httpapi.Invalid("from", "A contact cannot have the line's own handle.")
	}
	return line, from, nil
}

// simChat is the existing chat chatID, which contact from must be in, or
// else the one-to-one chat with from.
func (a *Admin) simChat(r *http.Request, line storage.Line, from, chatID string) (bridge.Chat, error) {
	if chatID == "" {
		return a.opts.Simulator.OneToOne(line.Service, from), nil
	}
	c, err := a.lineChat(r, line, chatID)
	if err != nil {
		return bridge.Chat{}, err
	}
	if !c.IsGroup && c.Identifier != from {
		return bridge.Chat{}, httpapi.Invalid("chat", "Chat %s is a one-to-one chat with %s.", c.ID, c.Identifier)
	}
	return bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: c.IsGroup, Participants: []string{from}}, nil
}

// lineChat is the stored chat chatID of line.
func (a *Admin) lineChat(r *http.Request, line storage.Line, chatID string) (storage.Chat, error) {
	c, err := a.db.ChatByID(r.Context(), chatID)
	if errors.Is(err, storage.ErrNotFound) || err == nil && c.LineID != line.ID {
		return c, httpapi.NotFound("chat_not_found", "chat", "No chat %s on line %s.", chatID, line.Handle)
	}
	return c, err
}

func (a *Admin) adminSimInbound(w http.ResponseWriter, r *http.Request) error {
	var req api.SimInbound
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, from, err := a.simContact(req.Line, req.From)
	if err != nil {
		return err
	}
	in := bridge.Inbound{Line: line.Handle, Service: line.Service, GUID: a.opts.Simulator.NewGUID(), Sender: from, SentAt: time.Now()}
	switch {
	case req.Attach != "" && req.Audio != "":
		return httpapi.Invalid("audio", "Give --attach or --audio, not both: a message carries one attachment.")
	case req.Transcription != nil && req.Audio == "":
		return httpapi.Invalid("transcription", "--transcription goes with --audio.")
	case req.Attach != "":
		in.Attachments = []bridge.File{{Path: req.Attach}}
	case req.Audio != "":
		if !mediatype.IsAudio(mediatype.ByName(req.Audio)) {
			return httpapi.Invalid("audio", "--audio needs an audio file (.m4a, .caf, .mp3, .wav, .aac, .amr), got %s.", filepath.Base(req.Audio))
		}
		in.Attachments = []bridge.File{{Path: req.Audio, Transcription: req.Transcription}}
		in.IsAudioMessage = true
	case req.Text == "":
		return httpapi.Missing("text")
	}
	if req.Text != "" {
		in.Text = &req.Text
	}
	if req.Late != "" {
		late, err := time.ParseDuration(req.Late)
		if err != nil || late <= 0 || late > 24*time.Hour {
			return httpapi.Invalid("late", "--late is a duration from 1s to 24h, such as 30m or 2h.")
		}
		in.SentAt, in.CatchUp = in.SentAt.Add(-late), late > bridge.LiveAge
	}
	switch {
	case req.UnknownSender && (req.Chat != "" || req.Group != ""):
		return httpapi.Invalid("unknown_sender", "--unknown-sender files a contact's one-to-one chat: not with --chat or --group.")
	case req.Chat != "" && req.Group != "":
		return httpapi.Invalid("chat", "Give --chat for an existing chat or --group for a new one, not both.")
	case req.Group != "":
		members := []string{}
		for _, p := range req.Participants {
			h, err := handle.Normalize(p)
			if err != nil {
				return httpapi.BadHandle("participants", p, err)
			}
			if h == line.Handle {
				return httpapi.Invalid("participants", "Participant %q is the line itself, not a contact.", p)
			}
			members = append(members, h)
		}
		if len(members) == 0 {
			return httpapi.Missing("participants")
		}
		in.Chat = a.opts.Simulator.NewGroup(line.Service, req.Group, members)
	default:
		if in.Chat, err = a.simChat(r, line, from, req.Chat); err != nil {
			return err
		}
		if req.UnknownSender {
			in.Chat.Filter = "unknown_sender"
		}
	}
	res, err := a.opts.Inbound.Record(r.Context(), in)
	if errors.Is(err, fs.ErrNotExist) {
		return httpapi.Invalid("attach", "No file at %s.", in.Attachments[0].Path)
	}
	if err != nil {
		return err
	}
	if res.SandboxActivated {
		a.log.Info("sandbox line activated", "line", line.Handle, "paired_handle", from)
	}
	httpapi.WriteJSON(w, http.StatusCreated, a.api.Message(res.Message))
	return nil
}

// adminSimOwnerSend records a message the line's owner sends from another
// device into a chat of the line: the simulated network's counterpart of
// a sent row of chat.db that no outbox item made.
func (a *Admin) adminSimOwnerSend(w http.ResponseWriter, r *http.Request) error {
	var req api.SimOwnerSend
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, err := a.simLine(req.Line)
	if err != nil {
		return err
	}
	switch {
	case req.To == "":
		return httpapi.Missing("to")
	case req.Text == "":
		return httpapi.Missing("text")
	}
	var chat bridge.Chat
	if strings.HasPrefix(req.To, "cht_") {
		c, err := a.lineChat(r, line, req.To)
		if err != nil {
			return err
		}
		chat = bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: c.IsGroup, Name: c.Name, Participants: c.Participants}
	} else {
		to := req.To
		if to == api.SimToSelf && len(line.SelfHandles) > 0 {
			to = line.SelfHandles[0]
		}
		to, err := handle.Normalize(to)
		switch {
		case err != nil:
			return httpapi.BadHandle("to", req.To, err)
		case to == line.Handle && !slices.Contains(line.SelfHandles, to):
			return httpapi.Invalid("to", "The owner's message goes to a contact, a chat or the owner's own chat (self), not to the line's own handle.")
		}
		chat = a.opts.Simulator.OneToOne(line.Service, to)
	}
	sent := bridge.Inbound{Line: line.Handle, Service: line.Service, GUID: a.opts.Simulator.NewGUID(),
		Chat: chat, Sender: line.Handle, IsFromMe: true, Text: &req.Text, SentAt: time.Now()}
	if req.ReplyTo != "" {
		m, err := a.api.FindMessage(r, line, req.ReplyTo, "reply_to")
		if err != nil {
			return err
		}
		sent.ReplyToGUID = m.GUID
	}
	res, err := a.opts.Inbound.Record(r.Context(), sent)
	if err != nil {
		return err
	}
	if !chat.IsGroup && slices.Contains(line.SelfHandles, chat.Identifier) {
		// As Messages on the owner's Mac does: the message sent to oneself
		// is written again as received, naming the sent one.
		copied := sent
		copied.GUID, copied.Sender, copied.IsFromMe, copied.EchoOf = a.opts.Simulator.NewGUID(), chat.Identifier, false, sent.GUID
		if _, err := a.opts.Inbound.Record(r.Context(), copied); err != nil {
			return err
		}
	}
	httpapi.WriteJSON(w, http.StatusCreated, a.api.Message(res.Message))
	return nil
}

func (a *Admin) adminSimReaction(w http.ResponseWriter, r *http.Request) error {
	var req api.SimReaction
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	var line storage.Line
	var from string
	var err error
	if req.From == api.SimToSelf {
		// The owner, in their chat with themselves.
		line, err = a.simLine(req.Line)
		switch {
		case err != nil:
		case len(line.SelfHandles) == 0:
			err = httpapi.Invalid("from", "Line %s has no chat of its owner with themselves (self_handles).", line.Handle)
		default:
			from = line.SelfHandles[0]
		}
	} else {
		line, from, err = a.simContact(req.Line, req.From)
	}
	if err != nil {
		return err
	}
	// Contacts may send the tapbacks of recent Apple systems, which lines
	// only receive.
	switch {
	case req.Type != bridge.ReactionEmoji && req.Type != bridge.ReactionSticker && !slices.Contains(bridge.ReactionTypes, req.Type):
		return httpapi.Invalid("type", "--type must be one of %s, %s or %s.", strings.Join(bridge.ReactionTypes, ", "), bridge.ReactionEmoji, bridge.ReactionSticker)
	case req.Type == bridge.ReactionEmoji && req.Emoji == "":
		return httpapi.Missing("emoji")
	case req.Type != bridge.ReactionEmoji && req.Emoji != "":
		return httpapi.Invalid("emoji", "--emoji goes with --type %s.", bridge.ReactionEmoji)
	}
	m, err := a.api.FindMessage(r, line, req.Message, "message")
	if err != nil {
		return err
	}
	c, err := a.db.ChatByID(r.Context(), m.ChatID)
	if err != nil {
		return err
	}
	if !slices.Contains(c.Participants, from) {
		return httpapi.Invalid("from", "%s is not in the chat of message %s.", from, req.Message)
	}
	rec, _, err := a.opts.Inbound.RecordReaction(r.Context(), bridge.InboundReaction{
		Line: line.Handle, Chat: bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: c.IsGroup},
		TargetGUID: m.GUID, Type: req.Type, Emoji: req.Emoji, Added: !req.Remove, Sender: from, SentAt: time.Now(),
	})
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusCreated, a.api.Reaction(rec))
	return nil
}

func (a *Admin) adminSimTyping(w http.ResponseWriter, r *http.Request) error {
	var req api.SimTyping
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, from, err := a.simContact(req.Line, req.From)
	if err != nil {
		return err
	}
	if req.State != "on" && req.State != "off" {
		return httpapi.Invalid("state", "--state must be on or off.")
	}
	chat, err := a.simChat(r, line, from, req.Chat)
	if err != nil {
		return err
	}
	ind, err := a.opts.Inbound.RecordTyping(r.Context(), bridge.InboundTyping{Line: line.Handle, Chat: chat, Sender: from, On: req.State == "on", At: time.Now()})
	if errors.Is(err, storage.ErrNotFound) {
		return httpapi.NotFound("chat_not_found", "chat", "%s has no chat with line %s yet: send a message first.", from, line.Handle)
	}
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusCreated, api.Indicator(ind))
	return nil
}

func (a *Admin) adminSimEdit(w http.ResponseWriter, r *http.Request) error {
	var req api.SimEdit
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, m, err := a.simOwnMessage(r, req.Line, req.From, req.Message)
	if err != nil {
		return err
	}
	switch {
	case req.Text == "":
		return httpapi.Missing("text")
	case m.Text == nil:
		return httpapi.Invalid("message", "Message %s has no text to edit.", req.Message)
	}
	// Storage takes an edit no later than the last one for old news: two
	// edits within a millisecond must still both count.
	at := time.Now()
	if at.UnixMilli() <= m.EditedAt {
		at = time.UnixMilli(m.EditedAt + 1)
	}
	return a.simUpdate(w, r, bridge.MessageUpdate{Line: line.Handle, GUID: m.GUID, Text: &req.Text, EditedAt: at})
}

func (a *Admin) adminSimUnsend(w http.ResponseWriter, r *http.Request) error {
	var req api.SimUnsend
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, m, err := a.simOwnMessage(r, req.Line, req.From, req.Message)
	if err != nil {
		return err
	}
	return a.simUpdate(w, r, bridge.MessageUpdate{Line: line.Handle, GUID: m.GUID, UnsentAt: time.Now()})
}

// simOwnMessage is a message that contact fromValue sent to the line and
// has not unsent: what a contact can still edit or unsend.
func (a *Admin) simOwnMessage(r *http.Request, lineValue, fromValue, message string) (storage.Line, storage.Message, error) {
	line, from, err := a.simContact(lineValue, fromValue)
	if err != nil {
		return line, storage.Message{}, err
	}
	if message == "" {
		return line, storage.Message{}, httpapi.Missing("message")
	}
	m, err := a.api.FindMessage(r, line, message, "message")
	switch {
	case err != nil:
		return line, m, err
	case m.IsFromMe || m.Sender != from:
		return line, m, httpapi.Invalid("from", "Message %s was sent by %s, not %s: a contact changes only its own messages.", message, m.Sender, from)
	case m.UnsentAt != 0:
		return line, m, httpapi.Invalid("message", "Message %s was unsent: it can no longer change.", message)
	}
	return line, m, nil
}

func (a *Admin) adminSimRead(w http.ResponseWriter, r *http.Request) error {
	var req api.SimRead
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, from, err := a.simContact(req.Line, req.From)
	if err != nil {
		return err
	}
	var m storage.Message
	if req.Message == "" {
		m, err = a.latestSent(r, line, from)
	} else {
		m, err = a.sentTo(r, line, from, req.Message)
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
	return a.simUpdate(w, r, u)
}

// sentTo is the line's message given as value (msg_ ID or GUID), which the
// line must have sent in its one-to-one chat with contact.
func (a *Admin) sentTo(r *http.Request, line storage.Line, contact, value string) (storage.Message, error) {
	m, err := a.api.FindMessage(r, line, value, "message")
	if err != nil {
		return m, err
	}
	if !m.IsFromMe {
		return m, httpapi.Invalid("message", "Message %s was sent by %s: a contact reads the line's messages.", value, m.Sender)
	}
	c, err := a.db.ChatByID(r.Context(), m.ChatID)
	if err != nil {
		return m, err
	}
	if c.IsGroup || c.Identifier != contact {
		return m, httpapi.Invalid("message", "Message %s is not in the one-to-one chat of line %s with %s.", value, line.Handle, contact)
	}
	return m, nil
}

// latestSent is the line's latest message in its one-to-one chat with
// contact.
func (a *Admin) latestSent(r *http.Request, line storage.Line, contact string) (storage.Message, error) {
	c, err := a.db.ChatByIdentifier(r.Context(), line.ID, contact)
	if errors.Is(err, storage.ErrNotFound) {
		return storage.Message{}, httpapi.NotFound("chat_not_found", "from", "%s has no chat with line %s yet.", contact, line.Handle)
	}
	if err != nil {
		return storage.Message{}, err
	}
	var after []byte
	for {
		msgs, next, err := a.db.ListMessages(r.Context(), c.ID, after, 100)
		if err != nil {
			return storage.Message{}, err
		}
		for _, m := range msgs {
			if m.IsFromMe {
				return m, nil
			}
		}
		if next == nil {
			return storage.Message{}, httpapi.NotFound("message_not_found", "message", "Line %s has sent %s nothing yet.", line.Handle, contact)
		}
		after = next
	}
}

// simUpdate records a simulated change to a message and answers with the
// message as it left it.
func (a *Admin) simUpdate(w http.ResponseWriter, r *http.Request, u bridge.MessageUpdate) error {
	m, _, err := a.opts.Inbound.RecordUpdate(r.Context(), u)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, a.api.Message(m))
	return nil
}

func (a *Admin) adminSimGroup(w http.ResponseWriter, r *http.Request) error {
	var req api.SimGroup
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	line, err := a.simLine(req.Line)
	if err != nil {
		return err
	}
	if req.Chat == "" {
		return httpapi.Missing("chat")
	}
	c, err := a.lineChat(r, line, req.Chat)
	if err != nil {
		return err
	}
	if !c.IsGroup {
		return httpapi.Invalid("chat", "Chat %s is a one-to-one chat with %s: only a group changes members, name or photo.", c.ID, c.Identifier)
	}
	if req.By == "" {
		return httpapi.Missing("by")
	}
	by, err := handle.Normalize(req.By)
	if err != nil {
		return httpapi.BadHandle("by", req.By, err)
	}
	member := func(h string) bool { return h == line.Handle || slices.Contains(c.Participants, h) }
	if !member(by) {
		return httpapi.Invalid("by", "%s is not a member of chat %s.", by, c.ID)
	}
	add, remove := req.Action == bridge.ChatParticipantAdded, req.Action == bridge.ChatParticipantRemoved
	switch {
	case req.Action == "":
		return httpapi.Missing("action")
	case !add && !remove && !slices.Contains([]string{bridge.ChatParticipantLeft, bridge.ChatRenamed, bridge.ChatPhotoChanged, bridge.ChatPhotoRemoved}, req.Action):
		return httpapi.Invalid("action", "Unknown action %q: a member is added, removed or leaves, or the group is renamed or its photo changed or removed.", req.Action)
	case req.Participant != "" && !add && !remove:
		return httpapi.Invalid("participant", "A participant goes with adding or removing a member; the one who leaves is --by.")
	case req.Name != "" && req.Action != bridge.ChatRenamed:
		return httpapi.Invalid("name", "A name goes with renaming the group.")
	}
	u := bridge.ChatUpdate{Line: line.Handle, GUID: a.opts.Simulator.NewGUID(), Action: req.Action, Name: req.Name, By: by, IsFromMe: by == line.Handle, At: time.Now(),
		Chat: bridge.Chat{GUID: c.GUID, Identifier: c.Identifier, IsGroup: true, Name: c.Name, Participants: c.Participants}}
	if add || remove {
		if req.Participant == "" {
			return httpapi.Missing("participant")
		}
		p, err := handle.Normalize(req.Participant)
		switch {
		case err != nil:
			return httpapi.BadHandle("participant", req.Participant, err)
		case add && member(p):
			return httpapi.Invalid("participant", "%s is already in chat %s.", p, c.ID)
		case remove && !member(p):
			return httpapi.Invalid("participant", "%s is not in chat %s.", p, c.ID)
		case remove && p == by:
			return httpapi.Invalid("participant", "%s cannot remove itself: it leaves (--leave).", p)
		}
		u.Participant = p
	}
	if req.Action == bridge.ChatParticipantLeft {
		u.Participant = by
	}
	rec, _, err := a.opts.Inbound.RecordChatUpdate(r.Context(), u)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, a.api.ChatEventData(rec, line.Handle))
	return nil
}

func (a *Admin) adminWebhooks(w http.ResponseWriter, r *http.Request) error {
	hooks, err := a.db.Webhooks(r.Context(), "")
	if err != nil {
		return err
	}
	out := make([]api.WebhookInfo, len(hooks))
	for i, h := range hooks {
		handles := make([]string, len(h.LineIDs))
		for j, id := range h.LineIDs {
			line, _ := a.db.LineByID(id)
			handles[j] = line.Handle
		}
		out[i] = api.WebhookInfo{ID: h.ID, Line: strings.Join(handles, ","), Owner: h.Owner, URL: h.URL, Events: h.Events, IsActive: h.IsActive,
			FailingSince: h.FailingSince, CreatedAt: h.CreatedAt}
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, nil))
	return nil
}

// adminAttempts lists recent delivery attempts, newest first, optionally of
// one webhook or one delivery.
func (a *Admin) adminAttempts(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := storage.AttemptFilter{WebhookID: q.Get("webhook"), DeliveryID: q.Get("delivery"), Limit: 50}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10000 {
			return httpapi.Invalid("limit", "--limit must be a number from 1 to 10000.")
		}
		f.Limit = n
	}
	attempts, err := a.db.Attempts(r.Context(), f)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), attempts, nil))
	return nil
}

func (a *Admin) adminRedeliver(w http.ResponseWriter, r *http.Request) error {
	var req struct {
		ID string `json:"id"`
	}
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	d, err := a.db.Redeliver(r.Context(), req.ID)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return httpapi.NotFound("delivery_not_found", "id", "No delivery %q (deliveries are kept for the [webhooks] retention).", req.ID)
	case errors.Is(err, storage.ErrWebhookInactive):
		return httpapi.Invalid("id", "Webhook %s of delivery %s is inactive; register it again to receive events.", d.WebhookID, req.ID)
	case err != nil:
		return err
	}
	a.log.Info("webhook delivery queued again", "delivery_id", d.ID, "webhook_id", d.WebhookID)
	httpapi.WriteJSON(w, http.StatusOK, map[string]any{"id": d.ID, "status": d.Status, "request_id": httpapi.RequestID(r.Context())})
	return nil
}

// WebhookTester sends a test event to a webhook's receiver, signed and
// posted as a delivery is, and recorded nowhere.
type WebhookTester interface {
	Send(ctx context.Context, hook storage.Webhook, event string, data json.RawMessage) webhook.TestResult
}

// adminTestWebhook sends a webhook a test event of a type it subscribes to,
// with sample data in the event's real shape, and answers what its receiver
// made of it. A receiver's failure is an answer, not an error of ours.
func (a *Admin) adminTestWebhook(w http.ResponseWriter, r *http.Request) error {
	var req api.WebhookTestRequest
	if err := decodeAdmin(r, &req); err != nil {
		return err
	}
	if a.opts.WebhookTester == nil {
		return errors.New("this daemon cannot send webhook test events")
	}
	h, err := a.db.WebhookByID(r.Context(), req.ID)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return httpapi.NotFound("webhook_not_found", "id", "No webhook %q; `blueline webhooks list` lists them.", req.ID)
	case err != nil:
		return err
	}
	event := req.Event
	switch {
	case event == "" && len(h.Events) > 0:
		event = h.Events[0]
	case !slices.Contains(h.Events, event):
		return httpapi.Invalid("event", "Webhook %s does not subscribe to %q; it subscribes to %s.", h.ID, event, strings.Join(h.Events, ", "))
	}
	line, _ := a.db.LineByID(h.LineIDs[0])
	data, err := a.api.EventData(sampleDelivery(event, line, time.Now().UnixMilli()), line.Handle)
	if err != nil {
		return err
	}
	res := a.opts.WebhookTester.Send(r.Context(), h, event, data)
	a.log.Info("webhook test event sent", "webhook_id", h.ID, "event", event, "status", res.StatusCode, "err", res.Error)
	httpapi.WriteJSON(w, http.StatusOK, res)
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
	case api.EventContactOptedOut, api.EventContactOptedIn:
		d.Contact = &storage.ContactChange{Handle: contact, At: now}
	case api.EventChatHandoff:
		d.Handoff = &storage.Handoff{ChatID: chat.ID, LineID: line.ID, State: storage.HandoffHumanActive, Until: now + 20*60*1000}
	case api.EventChatLeased, api.EventChatReleased:
		d.Lease = &storage.Lease{ChatID: chat.ID, LineID: line.ID, KeyID: sampleID("key_"), KeyLabel: "Blueline test", CreatedAt: now, ExpiresAt: now + 60*1000}
		if event == api.EventChatReleased {
			d.Lease.Released = storage.LeaseReleased
		}
	default:
		switch event {
		case api.EventMessageSent, api.EventMessageFailed, api.EventMessageDelivered, api.EventMessageSelf:
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

// fleetLineHandle is the handle of a line of another host of the fleet.
func (a *Admin) fleetLineHandle(ctx context.Context, id string) (string, bool) {
	if a.opts.FleetLines == nil {
		return "", false
	}
	return a.opts.FleetLines.LineHandle(ctx, id)
}

// fleetWord widens "on this server" when the server is one of a fleet.
func (a *Admin) fleetWord() string {
	if a.opts.FleetLines == nil {
		return ""
	}
	return " or in its fleet"
}
