package console

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// keepAlive is how often an idle live stream sends a comment, so that
// proxies do not close it.
const keepAlive = 25 * time.Second

// chatLive streams a chat's messages as server-sent events: each time
// something happens in the chat (a message, a reaction, an edit, a
// receipt), one "messages" event with the chat's messages rendered anew,
// which the page puts in place. It resumes after the event the page was
// rendered at, so that nothing between the page and the stream is missed.
func (c *Console) chatLive(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
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
	flusher, ok := w.(http.Flusher)
	if !ok {
		// Through wrappers that hide it, ResponseController still finds it.
		flusher = flushFunc(func() { http.NewResponseController(w).Flush() })
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": live\n\n")
	flusher.Flush()
	tick := time.NewTicker(keepAlive)
	defer tick.Stop()
	for {
		changed := c.opts.DB.EventsChanged()
		events, err := c.opts.DB.Events(r.Context(), after, 1000)
		if err != nil {
			c.log.Error("dashboard live", "err", err)
			return
		}
		touched := false
		for _, e := range events {
			after = e.Seq
			touched = touched || e.ChatID == id
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
			fmt.Fprintf(w, "event: messages\nid: %d\n", after)
			for line := range strings.Lines(buf.String()) {
				fmt.Fprintf(w, "data: %s\n", strings.TrimRight(line, "\r\n"))
			}
			fmt.Fprint(w, "\n")
			flusher.Flush()
		}
		if len(events) == 1000 {
			continue // more are waiting
		}
		select {
		case <-changed:
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
			flusher.Flush()
		case <-r.Context().Done():
			return
		case <-c.closed:
			return
		}
	}
}

type flushFunc func()

func (f flushFunc) Flush() { f() }
