// Package sim is an offline messaging network: lines send to simulated
// contacts, and simulated contacts text the lines. It lets the whole API be
// tried and tested with no Mac and no phone.
package sim

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/blueline-app/blueline/bridge"
)

// Network is the simulated network. Its zero value is not usable; use New.
type Network struct {
	latency time.Duration

	mu        sync.Mutex
	delivered []bridge.Outgoing
	reactions []bridge.Reaction
	typing    []bridge.Typing
	reads     []bridge.Read
	edits     []bridge.Edit
	unsends   []bridge.Unsend
	groups    []bridge.NewGroup
	changes   []bridge.GroupChange
	failures  map[string][]error
	// sink takes what the network records of the lines' own changes
	// (edits, unsends, group changes), as a Mac's chat.db reports them;
	// set by Run.
	sink bridge.Sink
	// lastEdit is each edited message's latest edit time (Unix ms):
	// edits are recorded in order.
	lastEdit map[string]int64
	// left holds the group chats (by GUID) each line left: line ‖ 0 ‖ GUID.
	left map[string]bool
	// unreachable holds the handles set not reachable on iMessage
	// (true) or reachable (false) by SetAvailability.
	unreachable map[string]bool
}

// New returns a network where every send takes latency.
func New(latency time.Duration) *Network {
	return &Network{latency: latency, failures: map[string][]error{}, lastEdit: map[string]int64{}, left: map[string]bool{},
		unreachable: map[string]bool{}}
}

// Send delivers a message to the simulated contacts of a chat.
func (n *Network) Send(ctx context.Context, out bridge.Outgoing) (bridge.Receipt, error) {
	if err := n.checkMember(out.Conversation); err != nil {
		return bridge.Receipt{}, err
	}
	if err := n.act(ctx, out.Chat, func() { n.delivered = append(n.delivered, out) }); err != nil {
		return bridge.Receipt{}, err
	}
	return bridge.Receipt{GUID: NewGUID(), SentAt: time.Now()}, nil
}

// React delivers a tapback.
func (n *Network) React(ctx context.Context, r bridge.Reaction) (bridge.Receipt, error) {
	if err := n.act(ctx, r.Chat, func() { n.reactions = append(n.reactions, r) }); err != nil {
		return bridge.Receipt{}, err
	}
	return bridge.Receipt{GUID: NewGUID(), SentAt: time.Now()}, nil
}

// SetTyping shows or hides the line's typing indicator.
func (n *Network) SetTyping(ctx context.Context, t bridge.Typing) error {
	return n.act(ctx, t.Chat, func() { n.typing = append(n.typing, t) })
}

// MarkRead sends a read receipt.
func (n *Network) MarkRead(ctx context.Context, r bridge.Read) error {
	return n.act(ctx, r.Chat, func() { n.reads = append(n.reads, r) })
}

// act takes the network's latency, then either fails as FailSends asked or
// records the action.
func (n *Network) act(ctx context.Context, chat bridge.Chat, record func()) error {
	if n.latency > 0 {
		t := time.NewTimer(n.latency)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if errs := n.failures[chat.Identifier]; len(errs) > 0 {
		n.failures[chat.Identifier] = errs[1:]
		return errs[0]
	}
	record()
	return nil
}

// Run waits for ctx: nothing arrives on the simulated network by itself.
// Simulated contacts write through `blueline sim inbound`, which the admin
// socket records directly so that it can print the stored message. The
// lines' own edits, unsends and group changes are reported to sink, as
// Messages records them.
func (n *Network) Run(ctx context.Context, sink bridge.Sink) error {
	n.mu.Lock()
	n.sink = sink
	n.mu.Unlock()
	<-ctx.Done()
	n.mu.Lock()
	n.sink = nil
	n.mu.Unlock()
	return nil
}

// errNotRunning is an action whose outcome the network cannot report yet.
var errNotRunning = errors.New("the simulated network is not running yet")

// report hands what the network recorded to the sink.
func (n *Network) report(f func(bridge.Sink) error) error {
	n.mu.Lock()
	sink := n.sink
	n.mu.Unlock()
	if sink == nil {
		return errNotRunning
	}
	return f(sink)
}

// Edit changes the text of a message the line sent, and reports the edit.
func (n *Network) Edit(ctx context.Context, e bridge.Edit) error {
	var at int64
	if err := n.act(ctx, e.Chat, func() {
		n.edits = append(n.edits, e)
		at = max(time.Now().UnixMilli(), n.lastEdit[e.TargetGUID]+1)
		n.lastEdit[e.TargetGUID] = at
	}); err != nil {
		return err
	}
	text := e.Text
	return n.report(func(s bridge.Sink) error {
		return s.ReceiveUpdate(ctx, bridge.MessageUpdate{Line: e.Line, GUID: e.TargetGUID, Text: &text, EditedAt: time.UnixMilli(at)})
	})
}

// Unsend takes back a message the line sent, and reports it.
func (n *Network) Unsend(ctx context.Context, u bridge.Unsend) error {
	if err := n.act(ctx, u.Chat, func() { n.unsends = append(n.unsends, u) }); err != nil {
		return err
	}
	return n.report(func(s bridge.Sink) error {
		return s.ReceiveUpdate(ctx, bridge.MessageUpdate{Line: u.Line, GUID: u.TargetGUID, UnsentAt: time.Now()})
	})
}

// CreateGroup creates a group chat with its first message.
func (n *Network) CreateGroup(ctx context.Context, g bridge.NewGroup) (bridge.Chat, bridge.Receipt, error) {
	chat := NewGroup(g.Service, g.Name, slices.Clone(g.Participants))
	if err := n.act(ctx, chat, func() { n.groups = append(n.groups, g) }); err != nil {
		return bridge.Chat{}, bridge.Receipt{}, err
	}
	return chat, bridge.Receipt{GUID: NewGUID(), SentAt: time.Now()}, nil
}

// ChangeGroup renames a group, adds or removes a member, or has the line
// leave it, and reports the change. A line that left a group can no longer
// send to it or change it.
func (n *Network) ChangeGroup(ctx context.Context, c bridge.GroupChange) error {
	if !c.Chat.IsGroup {
		return bridge.Permanent(fmt.Errorf("%s is not a group chat", c.Chat.Identifier))
	}
	if err := n.checkMember(c.Conversation); err != nil {
		return err
	}
	if err := n.act(ctx, c.Chat, func() {
		n.changes = append(n.changes, c)
		if c.Action == bridge.ChatParticipantLeft {
			n.left[c.Line+"\x00"+c.Chat.GUID] = true
		}
	}); err != nil {
		return err
	}
	u := bridge.ChatUpdate{Line: c.Line, Chat: c.Chat, GUID: NewGUID(), Action: c.Action, Participant: c.Participant, Name: c.Name,
		By: c.Line, IsFromMe: true, At: time.Now()}
	if c.Action == bridge.ChatParticipantLeft {
		u.Participant = c.Line
	}
	return n.report(func(s bridge.Sink) error { return s.ReceiveChatUpdate(ctx, u) })
}

// checkMember refuses an action in a group the line left.
func (n *Network) checkMember(c bridge.Conversation) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c.Chat.IsGroup && n.left[c.Line+"\x00"+c.Chat.GUID] {
		return bridge.Permanent(fmt.Errorf("line %s left the group %s", c.Line, c.Chat.Identifier))
	}
	return nil
}

// Availability tells whether handle is reachable on iMessage. The rule is
// fixed, so that tests and demonstrations can rely on it: every handle is,
// except phone numbers ending in 99 (an Android phone), unless
// SetAvailability said otherwise.
func (n *Network) Availability(ctx context.Context, line, handle string) (bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if unreachable, ok := n.unreachable[handle]; ok {
		return !unreachable, nil
	}
	return !(strings.HasPrefix(handle, "+") && strings.HasSuffix(handle, "99")), nil
}

// SetAvailability makes handle reachable on iMessage or not.
func (n *Network) SetAvailability(handle string, imessage bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.unreachable[handle] = !imessage
}

// FailSends makes the next actions (sends, reactions, typing, receipts) in
// a chat fail with errs, one error per action, the way a flaky or refusing
// network would.
func (n *Network) FailSends(identifier string, errs ...error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.failures[identifier] = append(n.failures[identifier], errs...)
}

// Delivered returns every message the network has delivered, oldest first.
func (n *Network) Delivered() []bridge.Outgoing { return snapshot(n, &n.delivered) }

// Reactions returns every tapback the network has delivered, oldest first.
func (n *Network) Reactions() []bridge.Reaction { return snapshot(n, &n.reactions) }

// Typing returns every typing change the network has shown, oldest first.
func (n *Network) Typing() []bridge.Typing { return snapshot(n, &n.typing) }

// Reads returns every read receipt the network has delivered, oldest first.
func (n *Network) Reads() []bridge.Read { return snapshot(n, &n.reads) }

// Edits returns every edit the network has made, oldest first.
func (n *Network) Edits() []bridge.Edit { return snapshot(n, &n.edits) }

// Unsends returns every unsend the network has made, oldest first.
func (n *Network) Unsends() []bridge.Unsend { return snapshot(n, &n.unsends) }

// Groups returns every group the network has created, oldest first.
func (n *Network) Groups() []bridge.NewGroup { return snapshot(n, &n.groups) }

// GroupChanges returns every group change the network has made, oldest
// first.
func (n *Network) GroupChanges() []bridge.GroupChange { return snapshot(n, &n.changes) }

func snapshot[T any](n *Network, list *[]T) []T {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]T(nil), *list...)
}

// OneToOne, NewGroup and NewGUID as methods: what code that makes
// simulated traffic without importing this package (the admin socket's
// sim commands) is handed.

// OneToOne is the package's OneToOne.
func (n *Network) OneToOne(service, contact string) bridge.Chat { return OneToOne(service, contact) }

// NewGroup is the package's NewGroup.
func (n *Network) NewGroup(service, name string, participants []string) bridge.Chat {
	return NewGroup(service, name, participants)
}

// NewGUID is the package's NewGUID.
func (n *Network) NewGUID() string { return NewGUID() }

// OneToOne names the one-to-one chat of a line with contact on service.
func OneToOne(service, contact string) bridge.Chat {
	return bridge.Chat{GUID: servicePrefix(service) + ";-;" + contact, Identifier: contact, Participants: []string{contact}}
}

// NewGroup names a new group chat, as the network does when one is created.
func NewGroup(service, name string, participants []string) bridge.Chat {
	digits, _ := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(10), big.NewInt(18), nil))
	id := fmt.Sprintf("chat%018d", digits)
	return bridge.Chat{GUID: servicePrefix(service) + ";+;" + id, Identifier: id, IsGroup: true, Name: name, Participants: participants}
}

func servicePrefix(service string) string {
	if service == "sms" {
		return "SMS"
	}
	return "iMessage"
}

// NewGUID returns a message GUID in the network's format, an upper-case
// UUID. Ours are version 7 (time first), so the GUID index grows at its end.
func NewGUID() string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(time.Now().UnixMilli())<<16)
	rand.Read(b[6:])
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
