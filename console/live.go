package console

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/blueline-app/blueline/client/sse"
	"github.com/blueline-app/blueline/storage"
)

// keepAlive is how often an idle live stream sends a comment, so that
// proxies do not close it.
const keepAlive = 25 * time.Second

// liveBusyRetry is the Retry-After of a live stream refused because its
// session has all its streams open.
const liveBusyRetry = 30 * time.Second

// chatLive streams a chat's messages as server-sent events: each time
// something happens in the chat (a message, a reaction, an edit, a
// receipt), one "messages" event with the chat's messages rendered anew,
// which the page puts in place. It resumes after the event the page was
// rendered at, so that nothing between the page and the stream is missed.
//
// A stream holds its session for as long as it is open: it ends when the
// session does (signing out, `blueline dashboard signout`, expiry), a
// session holds at most StreamsPerSession at once, and each ends after
// StreamLifetime (the browser reconnects with Last-Event-ID).
func (c *Console) chatLive(w http.ResponseWriter, r *http.Request) {
	id := pathValue(r, "id")
	// A browser reconnecting says where it got to.
	resume := r.Header.Get("Last-Event-ID")
	if resume == "" {
		resume = r.URL.Query().Get("after")
	}
	after, _ := strconv.ParseUint(resume, 10, 64)
	if _, err := c.loadChat(r, id); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	// Taken before the session is checked again, so that an end between
	// the check and the wait is not missed.
	revoked := c.opts.DB.Revoked()
	s, ok := c.session(r)
	if !ok {
		c.render(w, r, http.StatusUnauthorized, "error", nil, page{Title: "Signed out", Error: "Your session has ended: sign in again."})
		return
	}
	release, ok := c.streams.Take(s.ID)
	if !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(liveBusyRetry.Seconds())))
		c.render(w, r, http.StatusTooManyRequests, "error", &s, page{Title: "Too many live views",
			Error: "This session has " + strconv.Itoa(c.opts.StreamsPerSession) + " live views open, the most it may: close one."})
		return
	}
	defer release()
	end := time.NewTimer(min(c.opts.StreamLifetime, time.UnixMilli(s.ExpiresAt).Sub(c.now())))
	defer end.Stop()

	sw := sse.Start(w, "live")
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	// Typing indicators are no events: the stream follows them on their
	// own, and shows the chat again when one starts, stops or lapses. The
	// page says whether it showed one (typing=1): a change since is shown.
	typing, shown := c.opts.DB.TypingChanged(), ""
	if r.URL.Query().Get("typing") != "" {
		shown = "(the page's)"
	}
	lapse := time.NewTimer(time.Hour)
	defer lapse.Stop()
	for {
		changed := c.opts.DB.EventsChanged()
		events, err := c.opts.DB.Events(r.Context(), after, 1000)
		if err != nil {
			c.log.Error("dashboard live", "err", err)
			return
		}
		// Checked after the read: nothing committed after the session
		// ended is shown on it.
		if storage.Fired(revoked) {
			revoked = c.opts.DB.Revoked()
			if _, ok := c.session(r); !ok {
				return
			}
		}
		touched := false
		for _, e := range events {
			after = e.Seq
			touched = touched || e.ChatID == id
		}
		if now := typingShown(c.opts.DB.TypingIndicators(id, c.now())); now != shown {
			touched, shown = true, now
		}
		if touched {
			v, err := c.loadChat(r, id)
			if err != nil {
				c.log.Error("dashboard live", "err", err)
				return
			}
			var buf bytes.Buffer
			if err := c.pages["chat"].ExecuteTemplate(&buf, "messages", v); err != nil {
				c.log.Error("dashboard live: render", "err", err)
				return
			}
			// html/template leaves a CR in text as it is; the event's
			// data would bring it back as LF. A character reference
			// keeps it, in text and attribute values alike.
			html := strings.ReplaceAll(buf.String(), "\r", "&#13;")
			if err := sw.Event(strconv.FormatUint(after, 10), "messages", html); err != nil {
				return
			}
			sw.Flush()
			next := time.Hour
			for _, ind := range v.Typing {
				next = min(next, time.UnixMilli(ind.UpdatedAt).Add(storage.TypingTTL).Sub(c.now()))
			}
			lapse.Reset(next)
		}
		if len(events) == 1000 {
			continue // more are waiting
		}
		select {
		case <-changed:
		case <-typing:
			typing = c.opts.DB.TypingChanged()
		case <-lapse.C:
		case <-tick.C:
			sw.Comment("keep-alive")
			sw.Flush()
		case <-revoked: // checked above
		case <-end.C:
			return
		case <-r.Context().Done():
			return
		case <-c.closed:
			return
		}
	}
}

// typingShown is who is typing in a chat, as the page shows it: a change
// of it is worth an update.
func typingShown(list []storage.Indicator) string {
	var who []string
	for _, ind := range list {
		if ind.IsTyping {
			who = append(who, ind.Handle)
		}
	}
	return strings.Join(who, "\n")
}
