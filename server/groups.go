package server

import (
	"net/http"
	"slices"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/storage"
)

// maxGroupMembers is the most members (the line excluded) a group may be
// created with: Messages' own limit on an iMessage group is 32 people.
const maxGroupMembers = 31

// groupPayload is POST /v1/groups as the outbox keeps it.
type groupPayload struct {
	From         string   `json:"from"`
	Participants []string `json:"participants"`
	Name         string   `json:"name,omitempty"`
	Text         string   `json:"text"`
}

// createGroup creates a group chat with participants and its first
// message. Contact-first holds for every participant: each must have
// written to the line (its one-to-one chat has received a message). The
// item's chat_id is null until the network has created the group, then the
// new chat's ID.
func (s *Server) createGroup(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p groupPayload
	if p.From, err = b.required("from"); err != nil {
		return err
	}
	if p.Participants, err = b.strings("participants"); err != nil {
		return err
	}
	if p.Name, err = b.str("name"); err != nil {
		return err
	}
	if p.Text, err = b.required("text"); err != nil {
		return err
	}
	if p.Participants == nil {
		return httpapi.Missing("participants")
	}
	members := []string{}
	for _, v := range p.Participants {
		h, err := handle.Normalize(v)
		if err != nil {
			return httpapi.BadHandle("participants", v, err)
		}
		if !slices.Contains(members, h) {
			members = append(members, h)
		}
	}
	if len(members) < 2 {
		return httpapi.Invalid("participants", "A group needs at least 2 participants besides the line; for one, send to them directly.")
	}
	if len(members) > maxGroupMembers {
		return httpapi.Invalid("participants", "A group has at most %d participants besides the line.", maxGroupMembers)
	}
	line, err := s.lineFor(r, p.From, "from")
	if err != nil {
		return err
	}
	if err := s.capable(line, "groups"); err != nil {
		return err
	}
	if err := s.checkContacts(r.Context(), line, "participants", members...); err != nil {
		return err
	}
	for _, m := range members {
		if m == line.Handle {
			return httpapi.Invalid("participants", "The line %s is in its groups already: list the other members.", line.Handle)
		}
		wrote, err := s.contactWrote(r.Context(), line, m)
		if err != nil {
			return err
		}
		if !wrote {
			return httpapi.ContactFirst("participants", m, line.Handle, "put in a group")
		}
	}
	text := p.Text
	return s.enqueue(w, r, idem, line, p, storage.OutboxItem{
		Kind: storage.KindGroupCreate, Text: &text, Participants: members, GroupName: p.Name,
	})
}

// groupRenamePayload is POST /v1/groups/rename as the outbox keeps it.
type groupRenamePayload struct {
	From string `json:"from"`
	To   string `json:"to"`
	Name string `json:"name"`
}

// renameGroup names a group ("" clears its name).
func (s *Server) renameGroup(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p groupRenamePayload
	if p.From, p.To, err = b.fromTo(); err != nil {
		return err
	}
	if _, ok := b["name"]; !ok {
		return httpapi.Missing("name")
	}
	if p.Name, err = b.str("name"); err != nil {
		return err
	}
	line, chat, err := s.groupOf(r, p.From, p.To)
	if err != nil {
		return err
	}
	return s.enqueue(w, r, idem, line, p, storage.OutboxItem{
		Kind: storage.KindGroupChange, ChatID: chat.ID, GroupAction: bridge.ChatRenamed, GroupName: p.Name,
	})
}

// groupMembersPayload is POST /v1/groups/participants as the outbox keeps
// it: one of add or remove.
type groupMembersPayload struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Add    string `json:"add,omitempty"`
	Remove string `json:"remove,omitempty"`
}

// changeGroupMembers adds a member to a group (who must have written to
// the line, as for a new group) or removes one.
func (s *Server) changeGroupMembers(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p groupMembersPayload
	if p.From, p.To, err = b.fromTo(); err != nil {
		return err
	}
	if p.Add, err = b.str("add"); err != nil {
		return err
	}
	if p.Remove, err = b.str("remove"); err != nil {
		return err
	}
	param, value := "add", p.Add
	switch {
	case p.Add != "" && p.Remove != "":
		return httpapi.Invalid("remove", "Give add or remove, not both: one change at a time.")
	case p.Add == "" && p.Remove == "":
		e := httpapi.Missing("add")
		e.Message = "Missing required parameter: add (or remove)."
		return e
	case p.Remove != "":
		param, value = "remove", p.Remove
	}
	member, err := handle.Normalize(value)
	if err != nil {
		return httpapi.BadHandle(param, value, err)
	}
	line, chat, err := s.groupOf(r, p.From, p.To)
	if err != nil {
		return err
	}
	item := storage.OutboxItem{Kind: storage.KindGroupChange, ChatID: chat.ID, Participant: member}
	if param == "add" {
		p.Add, item.GroupAction = member, bridge.ChatParticipantAdded
		if member == line.Handle || slices.Contains(chat.Participants, member) {
			return httpapi.Invalid("add", "%s is in the group already.", member)
		}
		if err := s.checkContacts(r.Context(), line, "add", member); err != nil {
			return err
		}
		wrote, err := s.contactWrote(r.Context(), line, member)
		if err != nil {
			return err
		}
		if !wrote {
			return httpapi.ContactFirst("add", member, line.Handle, "add to a group")
		}
	} else {
		p.Remove, item.GroupAction = member, bridge.ChatParticipantRemoved
		if !slices.Contains(chat.Participants, member) {
			return httpapi.Invalid("remove", "%s is not in the group.", member)
		}
	}
	return s.enqueue(w, r, idem, line, p, item)
}

// groupLeavePayload is POST /v1/groups/leave as the outbox keeps it.
type groupLeavePayload struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// leaveGroup has the line leave a group.
func (s *Server) leaveGroup(w http.ResponseWriter, r *http.Request) error {
	b, idem, err := s.readWrite(r)
	if err != nil {
		return err
	}
	var p groupLeavePayload
	if p.From, p.To, err = b.fromTo(); err != nil {
		return err
	}
	line, chat, err := s.groupOf(r, p.From, p.To)
	if err != nil {
		return err
	}
	return s.enqueue(w, r, idem, line, p, storage.OutboxItem{
		Kind: storage.KindGroupChange, ChatID: chat.ID, GroupAction: bridge.ChatParticipantLeft,
	})
}

// groupOf resolves the line and the group chat of a group change. Changing
// a group the line is in starts no conversation with anyone new, so the
// contact-first rule is not applied (adding a member is: see
// changeGroupMembers).
func (s *Server) groupOf(r *http.Request, from, to string) (storage.Line, storage.Chat, error) {
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return line, storage.Chat{}, err
	}
	if err := s.capable(line, "groups"); err != nil {
		return line, storage.Chat{}, err
	}
	tgt, err := s.resolveTo(r, line, to)
	if err != nil {
		return line, tgt.chat, err
	}
	if !tgt.found || !tgt.chat.IsGroup {
		return line, tgt.chat, httpapi.Invalid("to", "to must be a group chat of line %s (a cht_ ID or its chat… identifier).", line.Handle)
	}
	return line, tgt.chat, nil
}
