package server

import (
	"context"
	"errors"
	"net/http"

	"github.com/blueline-app/blueline/httpapi"

	"github.com/blueline-app/blueline/storage"
)

// The conversation rules: what a write must pass before it is accepted, in
// the order it is checked, and why each check is safe where it runs.
//
//  1. Authentication, the rate limit and the scope (serveAPI). The rate
//     limit comes before the scope so that probing scopes costs requests.
//  2. The request's own validity (each handler): 400 before anything is
//     looked up, so a malformed request learns nothing about what exists.
//  3. The line (lineFor, checkLineAccess): 404 line_not_found for a line
//     that is not configured, 403 line_not_accessible for one the key is
//     restricted from, 403 sandbox_requires_owner for the sandbox line with
//     an ownerless key. Lines change only when the daemon restarts, so the
//     answer holds until the item commits.
//  4. Advanced features, when the write needs them: as the line's bridge
//     reports now. A helper that drops after this check fails the send in
//     the worker, which is where that can be known.
//  5. The recipient (resolveTo): a chat of another line, another owner's
//     sandbox chat, or an ID that names nothing are 404 chat_not_found, as
//     if they did not exist (the one not-found rule).
//  6. The sandbox and contact-first rules (checkRecipient): the owner's
//     sandbox must be activated and the recipient its paired phone; outside
//     the sandbox the chat must have received a message. A group chat also
//     passes when every member has written to the line in a one-to-one
//     chat (contactWrote): that is the rule a group created through the
//     API was created under (POST /v1/groups), and a member added through
//     it (POST /v1/groups/participants). Both are checked on a read
//     snapshot and not again at commit, which is safe because neither can
//     be undone: a pairing is once and for all, and a chat that has
//     received a message keeps has_received_inbound. (A member a contact
//     adds later may not have written: the group then needs its inbound
//     message as before.) The owner's chat with themselves (one of the
//     line's self_handles) passes once it exists: the owner is no
//     stranger to their own line, and their messages there are sent rows,
//     which do not open a chat. Which chat that is comes from the
//     configuration, fixed while the daemon runs.
//  7. Files and replied-to messages (fileByID, findMessage): the same
//     not-found rule, by the file's line or owner and the message's line and
//     chat. Files and messages are never reassigned, so the snapshot holds.
//  8. Idempotency and the sandbox quota (enqueue, storage.Enqueue): these
//     change with every request, so they are decided inside the transaction
//     that stores the item: a replay is found before the quota is counted
//     (a replay never costs quota), and two concurrent sends cannot both
//     take the last unit of a day's quota.
//  9. Opted-out and blocked contacts (storage.Enqueue, refusedContact): 403
//     contact_opted_out for a contact who texted one of the line's opt-out
//     keywords (STOP…) and not an opt-in one (START…) since, 403
//     contact_blocked for one on the line's blocked list. Both change at
//     any moment (an inbound STOP is recorded in the transaction that
//     stores it), so they are decided inside the transaction that stores
//     the item: a send accepted before the STOP commits is sent, none
//     after. They apply to a one-to-one chat with the contact, a new group
//     with them and adding them to a group, not to an existing group's
//     messages; an unsend always passes. The line's own reply to an
//     opt-out is put in the outbox by that transaction, past this rule.
// 10. Agents (agentCheck, storage.Enqueue): a write of an agent key to a
//     chat is refused 409 human_active while the line's owner has the
//     chat (they wrote in it from their own devices within the line's
//     takeover_quiet, and did not resume the agents), and 409 chat_leased
//     while another key holds its lease. Both change at any moment (an
//     owner's message, a lease taken), so they are decided inside the
//     transaction that stores the item, against the server's clock: a
//     write either committed before the takeover or lease, or sees it.
//     After the idempotency check, so that a replay of a write accepted
//     before still answers with its item. Keys that are not agents' and
//     the console are never held back: the owner always overrides.
// 11. Approval (approvalCheck, storage.Enqueue): an agent key's message
//     (text, audio message, voice note, edit, a new group's first
//     message) waits for the owner's approval when the key or the line
//     requires it (unless every contact of the chat is on that one's
//     approval_except list), and, on a line with takeover = "hold",
//     instead of rule 10's 409 human_active. It is stored pending with
//     approval "waiting" and kept out of the due queue, in the
//     transaction that stores it: delivery cannot claim it, and a restart
//     leaves it waiting. Approving puts it in the due queue, declining or
//     expiring fails it, each in one transaction that first checks it
//     still waits (and has not expired against the clock), so a draft is
//     answered once. The settings are fixed for the key's or the line's
//     life, so reading them before the transaction is safe; whether the
//     owner holds the chat is rule 10's, decided inside it. The same
//     transaction puts the draft's prompt in the outbox, to the owner's
//     chat with themselves (storage/selfapproval.go): a message of the
//     line's own, past these rules like the reply to an opt-out, which
//     cannot loop (Blueline's sends there are never message.self) and
//     asks nothing no one may (only the owner writes in that chat; a
//     tapback Blueline sends is recorded as sent, never as the owner's
//     answer).
// 12. Sender gating (agentCheck, storage.Enqueue): an agent key with an
//     allow-list (allow_from) writes only to the contacts on it: 403
//     contact_not_allowed for a one-to-one chat with another contact, a
//     new group with one among its members, or adding one to a group. A
//     message to an existing group passes when every member is on the
//     list, or when the key has a group_mention (it answers mentions
//     there); an unsend always passes. The list is fixed for the key's
//     life; a chat's contact never changes, and a group's members are
//     read in the transaction that stores the item, so a member added
//     meanwhile is either seen or added after the write. The owner's chat
//     with themselves is no contact's and passes (its chat and the line's
//     self_handles are fixed).
// 13. Again when an agent key's item falls due (storage.ClaimDue,
//     holdBack): what can change after it was accepted (a scheduled
//     send_at, a retry's wait, a draft approved later) is decided again
//     in the transaction that claims it, against the worker's clock:
//     rule 9's opt-outs and blocks, and rule 10's takeover and lease. A
//     refused item becomes failed with the API's code (contact_opted_out,
//     contact_blocked, human_active, chat_leased) instead of claimed, or,
//     refused human_active on a line with takeover = "hold", a draft
//     waiting for approval as rule 11 makes at acceptance. It is safe
//     there because the claim is the one transaction that moves a pending
//     item to the network: a STOP, takeover or lease committed before it
//     is seen, one after it finds the item claimed, as a write accepted
//     before it would be; and a crash before the commit leaves the item
//     pending and due. An item the owner approved passes the takeover
//     and the lease (the owner answered it), and one already handed to a
//     network that sends at most once, or claimed when the daemon
//     stopped (MayHaveSent), passes all of them (it may have gone out). Gating (rule 12) and approval are not decided again: a
//     key's settings and a chat's contact do not change.

// conversation resolves the line and recipient of a write and applies
// rules 3 to 6.
func (s *Server) conversation(r *http.Request, from, to string, advanced bool) (storage.Line, target, error) {
	line, err := s.lineFor(r, from, "from")
	if err != nil {
		return line, target{}, err
	}
	if advanced && !s.opts.Advanced(line) {
		return line, target{}, httpapi.InvalidRequest("advanced_features_required", "from",
			"Line %s does not have advanced features (reactions, typing, read receipts, audio messages) now.", line.Handle)
	}
	tgt, err := s.resolveTo(r, line, to)
	if err != nil {
		return line, tgt, err
	}
	return line, tgt, s.checkRecipient(r, line, tgt)
}

// contactWrote reports whether contact has written to line: its one-to-one
// chat with the line has received a message.
func (s *Server) contactWrote(ctx context.Context, line storage.Line, contact string) (bool, error) {
	c, err := s.db.ChatByIdentifier(ctx, line.ID, contact)
	if errors.Is(err, storage.ErrNotFound) {
		return false, nil
	}
	return err == nil && !c.IsGroup && c.HasReceivedInbound, err
}

// everyMemberWrote reports whether each of members has written to line.
func (s *Server) everyMemberWrote(ctx context.Context, line storage.Line, members []string) (bool, error) {
	if len(members) == 0 {
		return false, nil
	}
	for _, m := range members {
		if ok, err := s.contactWrote(ctx, line, m); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// refusedContact is the 403 of rules 9 and 12.
func refusedContact(e *storage.ContactError, line storage.Line) error {
	if errors.Is(e, storage.ErrContactNotAllowed) {
		return httpapi.Forbidden("contact_not_allowed",
			"This agent key may write only to the contacts it allows (its allow_from), and %s is not one of them.", e.Handle)
	}
	if errors.Is(e, storage.ErrContactBlocked) {
		return httpapi.Forbidden("contact_blocked",
			"%s is blocked on line %s: remove it from the blocked list (DELETE /v1/contacts/blocked/{handle}) to write to it.", e.Handle, line.Handle)
	}
	return httpapi.Forbidden("contact_opted_out",
		"%s opted out of messages from line %s (it texted an opt-out keyword such as STOP); it opts back in by texting START.", e.Handle, line.Handle)
}

// checkRecipient applies the sandbox and contact-first rules (rule 6).
func (s *Server) checkRecipient(r *http.Request, line storage.Line, tgt target) error {
	if line.IsSandbox {
		st, _, err := s.db.Sandbox(r.Context(), apiKey(r.Context()).Owner)
		if err != nil {
			return err
		}
		if !st.Activated {
			return httpapi.Forbidden("sandbox_not_activated",
				"Your sandbox on %s is not activated: get your code with POST /v1/sandbox, then text it to %s from your phone.", line.Handle, line.Handle)
		}
		if tgt.chat.IsGroup || tgt.contact != st.PairedHandle {
			return httpapi.InvalidRequest("sandbox_contact_mismatch", "to", "The sandbox line only sends to its paired number %s.", st.PairedHandle)
		}
	}
	if tgt.found && line.IsSelfChat(tgt.chat) {
		return nil
	}
	if tgt.found && !tgt.chat.HasReceivedInbound && tgt.chat.IsGroup {
		all, err := s.everyMemberWrote(r.Context(), line, tgt.chat.Participants)
		if err != nil || all {
			return err
		}
	}
	if !tgt.found || !tgt.chat.HasReceivedInbound {
		return httpapi.ContactFirst("to", tgt.contact, line.Handle, "message")
	}
	return nil
}
