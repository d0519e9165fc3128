package messages

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Health is what the bridge last saw of the permissions and programs it
// depends on, for the console and /readyz. Each is known only once used:
// macOS tells whether Automation is allowed when a script runs.
type Health struct {
	// ChatDB is "readable", or "not readable" when the last read of
	// chat.db failed (Full Disk Access withdrawn, the file gone): the log
	// says why. Health is shown without authentication (/readyz), so it
	// carries no paths or error texts.
	ChatDB string
	// Automation is "granted", "denied", "permission pending" (no script
	// has worked since the start, and one timed out: a prompt may be
	// waiting on the Mac's screen) or "not used yet".
	Automation string
	// Messages is "running", "not running", "not answering" (it answered
	// before, and a script or ping timed out) or "not seen yet", as the
	// last script found it.
	Messages string
	// Helper is "connected" or "not connected": the private-API helper.
	Helper string
	// LastScript is when a script last ran (zero for never).
	LastScript time.Time
	// What the watcher took for other than news since the daemon started:
	// rows stored as history (old rows written again, as iCloud does),
	// twins of stored messages not stored again, and rows Messages filed
	// away from the inbox (junk, filter folders, held unknown senders).
	HistoryRows, Twins, Screened int64
	// ReplacedAt is when the watcher last found another file at chat.db's
	// path and started reading it afresh (zero: not since the start).
	ReplacedAt time.Time
	// SendingAlias is the owner's address Messages last sent from when it
	// is not the line's handle (Messages' "Start new conversations from"
	// set to another alias), "" otherwise. String says only that there is
	// one: /readyz is public.
	SendingAlias string
}

func (h Health) String() string {
	parts := []string{"chat.db " + h.ChatDB, "Automation " + h.Automation, "Messages " + h.Messages, "helper " + h.Helper}
	if h.HistoryRows+h.Twins+h.Screened > 0 {
		parts = append(parts, fmt.Sprintf("%d rows taken as history, %d twins suppressed, %d rows screened", h.HistoryRows, h.Twins, h.Screened))
	}
	if !h.ReplacedAt.IsZero() {
		parts = append(parts, "chat.db replaced at "+h.ReplacedAt.UTC().Format(time.RFC3339))
	}
	if h.SendingAlias != "" {
		parts = append(parts, "Messages sends from another alias than the line's handle")
	}
	return strings.Join(parts, "; ")
}

// healthState is the Health a bridge builds as it works.
type healthState struct {
	mu         sync.Mutex
	readErr    error
	automation string
	messages   string
	lastScript time.Time

	historyRows, twins, screened int64
	replacedAt                   time.Time
	alias                        string
}

// sentFrom records the owner's address a row of the line went out from,
// and reports whether it is another alias than the line's handle seen for
// the first time.
func (s *healthState) sentFrom(callerID, line string) (news bool) {
	if callerID == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if sameAddress(callerID, line) {
		s.alias = ""
		return false
	}
	news = s.alias != callerID
	s.alias = callerID
	return news
}

// sameAddress compares two handles as Messages writes them: e-mail
// addresses without case, either with or without a "tel:"/"mailto:"
// prefix.
func sameAddress(a, b string) bool {
	trim := func(s string) string {
		s = strings.ToLower(strings.TrimSpace(s))
		for _, p := range []string{"tel:", "mailto:"} {
			s = strings.TrimPrefix(s, p)
		}
		return s
	}
	return trim(a) == trim(b)
}

// counted adds to the counts of rows taken for other than news.
func (s *healthState) counted(history, twins, screened int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.historyRows += int64(history)
	s.twins += int64(twins)
	s.screened += int64(screened)
}

func (s *healthState) replaced(at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replacedAt = at
}

func (s *healthState) read(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.readErr = err
}

// script records what a script's outcome says of Automation and Messages.
func (s *healthState) script(err error, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastScript = at
	switch {
	case err == nil:
		s.automation, s.messages = "granted", "running"
	case errors.Is(err, ErrAutomationDenied):
		s.automation = "denied"
	case errors.Is(err, ErrNotRunning):
		s.automation, s.messages = "granted", "not running"
	case errors.Is(err, ErrChatNotFound):
		s.automation, s.messages = "granted", "running"
	case errors.Is(err, ErrTimedOut) && s.automation == "granted":
		s.messages = "not answering"
	case errors.Is(err, ErrTimedOut):
		// Nothing has worked yet: osascript waits on the prompt that
		// asks the owner to allow Automation, and nobody answers it.
		s.automation = "permission pending"
	}
}

// down says why the line cannot work now (Automation not granted,
// Messages not answering), nil when it may.
func (s *healthState) down() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.automation == "denied":
		return errors.New("messages: Automation permission denied: allow Blueline to control Messages (System Settings > Privacy & Security > Automation)")
	case s.automation == "permission pending":
		return errors.New("messages: Automation permission pending: a prompt may be waiting on the Mac's screen")
	case s.messages == "not answering":
		return errors.New("messages: Messages is not answering")
	}
	return nil
}

// Health reports the bridge's health as last seen.
func (b *Bridge) Health() Health {
	s := &b.sender.health
	s.mu.Lock()
	h := Health{ChatDB: "readable", Automation: s.automation, Messages: s.messages, LastScript: s.lastScript}
	s.mu.Unlock()
	b.health.mu.Lock()
	if b.health.readErr != nil {
		h.ChatDB = "not readable (see the log)"
	}
	h.HistoryRows, h.Twins, h.Screened, h.ReplacedAt = b.health.historyRows, b.health.twins, b.health.screened, b.health.replacedAt
	h.SendingAlias = b.health.alias
	b.health.mu.Unlock()
	if h.Automation == "" {
		h.Automation = "not used yet"
	}
	if h.Messages == "" {
		h.Messages = "not seen yet"
	}
	h.Helper = "not connected"
	if b.Advanced() {
		h.Helper = "connected"
	}
	return h
}
