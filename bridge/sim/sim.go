// Package sim is an offline messaging network: lines send to simulated
// contacts, and simulated contacts text the lines. It lets the whole API be
// tried and tested with no Mac and no phone.
package sim

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"math/big"
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
	failures  map[string][]error
}

// New returns a network where every send takes latency.
func New(latency time.Duration) *Network {
	return &Network{latency: latency, failures: map[string][]error{}}
}

// Send delivers a message to the simulated contacts of a chat.
func (n *Network) Send(ctx context.Context, out bridge.Outgoing) (bridge.Receipt, error) {
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
// socket records directly so that it can print the stored message.
func (n *Network) Run(ctx context.Context, sink bridge.Sink) error {
	<-ctx.Done()
	return nil
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

func snapshot[T any](n *Network, list *[]T) []T {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]T(nil), *list...)
}

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
