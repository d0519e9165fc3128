package storage

import (
	"errors"
	"regexp"
	"slices"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/blueline-app/blueline/client/api"
)

// ErrContactNotAllowed is an agent key's write to a contact its sender
// gating does not allow (wrapped in a *ContactError).
var ErrContactNotAllowed = errors.New("the agent key's allow-list does not name the contact")

// Gate is an agent key's sender gating: the contacts it hears from and
// writes to (AllowFrom, handles; empty for any), and in groups only the
// contacts' messages that match GroupMention (a Go regexp; "" for any).
// The zero Gate lets everything through.
type Gate struct {
	AllowFrom    []string `json:"allow_from,omitempty"`
	GroupMention string   `json:"group_mention,omitempty"`
}

// IsZero reports whether g lets everything through.
func (g Gate) IsZero() bool { return len(g.AllowFrom) == 0 && g.GroupMention == "" }

func (g Gate) allows(handle string) bool {
	return len(g.AllowFrom) == 0 || slices.Contains(g.AllowFrom, handle)
}

// admits reports whether an event of chat c reaches a receiver behind g:
// every event of a one-to-one chat with an allowed contact; in a group,
// only the allowed contacts' messages that match GroupMention. A chat
// unknown here (c nil: another node's, in a fleet) admits nothing.
func (g Gate) admits(event string, s EventSubject, c *Chat) bool {
	switch {
	case g.IsZero() || s.SelfChat:
		// The owner's chat with themselves is no contact's: nothing
		// gates it.
		return true
	case c == nil:
		return false
	case !c.IsGroup:
		return g.allows(c.Identifier)
	}
	m := s.Message
	if event != api.EventMessageReceived || m == nil || m.IsFromMe || !g.allows(m.Sender) {
		return false
	}
	return g.GroupMention == "" || m.Text != nil && mentionPattern(g.GroupMention).MatchString(*m.Text)
}

// refuse is the gate's rule of Enqueue: a write to a one-to-one chat with
// a contact g does not allow, a new group with one among its members, or
// adding one to a group, is a *ContactError (ErrContactNotAllowed). A
// message to an existing group passes when the key answers mentions
// there (GroupMention) or allows every member. An unsend always passes.
func (g Gate) refuse(tx *bolt.Tx, item OutboxItem) error {
	if len(g.AllowFrom) == 0 {
		return nil
	}
	contacts, group, err := recipients(tx, item)
	if err != nil {
		return err
	}
	if group != nil && g.GroupMention == "" {
		contacts = group.Participants
	}
	for _, h := range contacts {
		if !g.allows(h) {
			return &ContactError{Handle: h, Err: ErrContactNotAllowed}
		}
	}
	return nil
}

// mentionPatterns caches the compiled GroupMention of each gate: checked
// on every event, compiled once.
var mentionPatterns sync.Map // pattern → *regexp.Regexp

// mentionPattern is a GroupMention compiled. Patterns are checked when a
// key is created (ValidMention); one that no longer compiles matches
// nothing.
func mentionPattern(p string) *regexp.Regexp {
	if re, ok := mentionPatterns.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re, err := regexp.Compile(p)
	if err != nil {
		re = regexp.MustCompile(`[^\s\S]`)
	}
	mentionPatterns.Store(p, re)
	return re
}

// ValidMention checks a GroupMention: a Go regular expression.
func ValidMention(p string) error {
	_, err := regexp.Compile(p)
	return err
}

// Wake is what wakes a receiver of events (a webhook, an event stream)
// besides the events it names: the arrivals and chats of message events,
// and its key's sender gating. The zero Wake takes every event.
type Wake struct {
	// Arrivals are the arrivals of the message events it takes
	// (api.Arrival…); empty for every one.
	Arrivals []string `json:"arrivals,omitempty"`
	// SkipFiltered leaves out the message events of chats Messages files
	// under a filter (an unknown sender's).
	SkipFiltered bool `json:"skip_filtered,omitempty"`
	Gate
}

// Wakes reports whether an event, about chat c (nil when it is not known
// here), reaches the receiver. The arrival is the one recorded with the
// event: a receiver that was down gets, late, what it asked for.
func (w Wake) Wakes(event string, s EventSubject, c *Chat) bool {
	if s.Message != nil && strings.HasPrefix(event, "message.") {
		if len(w.Arrivals) > 0 && !slices.Contains(w.Arrivals, s.RecordedArrival()) {
			return false
		}
		if w.SkipFiltered && s.ChatFilter != "" {
			return false
		}
	}
	return w.Gate.admits(event, s, c)
}

// RecordedArrival is how a message event's message reached Blueline:
// api.ArrivalCatchUp for news read late, else api.ArrivalLive.
func (s EventSubject) RecordedArrival() string {
	if s.Arrival == "" {
		return api.ArrivalLive
	}
	return s.Arrival
}
