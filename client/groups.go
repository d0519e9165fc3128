package client

import "context"

// GroupService creates group chats and changes those the line is in
// (/v1/groups); the line needs the groups capability. Each call answers
// an outbox item; the chat changes when the network records the change
// (event chat.updated, by the line).
type GroupService struct{ c *Client }

// GroupCreateParams is a group chat to create with its first message.
type GroupCreateParams struct {
	From string `json:"from"` // the line (required)
	// Participants are the other members' handles, 2 to 31 of them, each
	// a contact who has written to the line (required).
	Participants []string `json:"participants"`
	Name         string   `json:"name,omitempty"` // the group's name; "" leaves it unnamed
	Text         string   `json:"text"`           // the first message (required)

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Create queues a new group and its first message; the answer is its
// outbox item, whose ChatID is nil until the network has created the
// group, then the new chat's cht_ ID (see Outbox.Get). A participant who
// has not written to the line is a 403 contact_has_not_messaged
// (ErrPermission, Param "participants").
func (s *GroupService) Create(ctx context.Context, p GroupCreateParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/groups", p, p.IdempotencyKey)
}

// GroupRenameParams names a group.
type GroupRenameParams struct {
	From string `json:"from"` // the line (required)
	To   string `json:"to"`   // the group: a cht_ ID or its chat… identifier (required)
	Name string `json:"name"` // the new name; "" clears it

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Rename queues a change of the group's name; the answer is its outbox
// item.
func (s *GroupService) Rename(ctx context.Context, p GroupRenameParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/groups/rename", p, p.IdempotencyKey)
}

// GroupParticipantParams names one member of a group to add or remove.
type GroupParticipantParams struct {
	From   string // the line (required)
	To     string // the group: a cht_ ID or its chat… identifier (required)
	Handle string // the member's handle (required)

	IdempotencyKey string // see MessageSendParams
}

// groupMembersBody is POST /v1/groups/participants: one of add or remove.
type groupMembersBody struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Add    string `json:"add,omitempty"`
	Remove string `json:"remove,omitempty"`
}

// AddParticipant queues adding a member, who must have written to the line
// (403 contact_has_not_messaged, Param "add"); the answer is its outbox
// item. A member already in is a 400 invalid_parameter_value.
func (s *GroupService) AddParticipant(ctx context.Context, p GroupParticipantParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/groups/participants", groupMembersBody{From: p.From, To: p.To, Add: p.Handle}, p.IdempotencyKey)
}

// RemoveParticipant queues removing a member; the answer is its outbox
// item. One who is not in the group is a 400 invalid_parameter_value.
func (s *GroupService) RemoveParticipant(ctx context.Context, p GroupParticipantParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/groups/participants", groupMembersBody{From: p.From, To: p.To, Remove: p.Handle}, p.IdempotencyKey)
}

// GroupLeaveParams has the line leave a group.
type GroupLeaveParams struct {
	From string `json:"from"` // the line (required)
	To   string `json:"to"`   // the group: a cht_ ID or its chat… identifier (required)

	IdempotencyKey string `json:"-"` // see MessageSendParams
}

// Leave queues the line's leaving the group; the answer is its outbox
// item. The chat stays listed; the network refuses later sends to it.
func (s *GroupService) Leave(ctx context.Context, p GroupLeaveParams) (*Accepted, error) {
	return s.c.write(ctx, "/v1/groups/leave", p, p.IdempotencyKey)
}
