package console_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"text/template"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/client/sse"
)

// A chat's live stream: it lives no longer than its session, a session
// holds a few at most, and nothing a contact writes can forge its events.

// inbound has alice text the main line, through the admin socket.
func (e *env) inbound(text, attach string) api.Message {
	e.t.Helper()
	var m api.Message
	if err := e.adminDo("POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: text, Attach: attach}, &m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// live opens a chat's live stream in the browser's session, for at most
// 10 s, and returns it once its first event (the chat as it is) came.
func (b *browser) live(chatID string) (*http.Response, *sse.Reader) {
	b.e.t.Helper()
	resp := b.openLive(chatID)
	if resp.StatusCode != http.StatusOK {
		b.e.t.Fatalf("live stream: %d", resp.StatusCode)
	}
	r := sse.NewReader(resp.Body)
	if ev, err := r.Next(); err != nil || ev.Name != "messages" {
		b.e.t.Fatalf("the live stream's first event: %+v %v", ev, err)
	}
	return resp, r
}

func (b *browser) openLive(chatID string) *http.Response {
	b.e.t.Helper()
	return b.openStream("/dashboard/chats/" + chatID + "/live")
}

// openStream opens a live stream at path, as a page's script does.
func (b *browser) openStream(path string) *http.Response {
	b.e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	req, _ := http.NewRequestWithContext(ctx, "GET", b.e.base+path, nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := b.client.Do(req)
	if err != nil {
		cancel()
		b.e.t.Fatal(err)
	}
	b.e.t.Cleanup(func() { resp.Body.Close(); cancel() })
	return resp
}

// Signing out, and `blueline dashboard signout`, end the session's live
// streams within a second or two; what comes after never shows on them.
func TestLiveEndsWithTheSession(t *testing.T) {
	for name, end := range map[string]func(b *browser){
		"sign-out": func(b *browser) {
			if a := b.do("POST", "/dashboard/logout", url.Values{"csrf": {b.csrf()}}); a.status != http.StatusSeeOther {
				t.Fatalf("sign out: %d %s", a.status, a.body)
			}
		},
		"dashboard signout": func(b *browser) {
			if err := b.e.adminDo("POST", "/dashboard/sessions/end", map[string]string{}, nil); err != nil {
				t.Fatal(err)
			}
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := start(t, "")
			b := e.browser()
			b.signIn("")
			m := e.inbound("before", "")
			_, r := b.live(m.ChatID)

			ended := time.Now()
			end(b)
			e.inbound("after the session ended", "")
			for {
				ev, err := r.Next()
				if err != nil {
					if err != io.EOF {
						t.Errorf("the live stream did not end: %v", err)
					}
					break
				}
				t.Errorf("after the session ended the live stream sent %q", ev.Data)
			}
			if d := time.Since(ended); d > 2*time.Second {
				t.Errorf("the live stream ended %s after the session", d)
			}
			if resp := b.openLive(m.ChatID); resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("a live stream of the ended session: %d, want 401", resp.StatusCode)
			}
		})
	}
}

// A session holds at most [limits] streams_per_key live streams: one more
// is 429 with Retry-After; another session is not held back.
func TestLivePerSession(t *testing.T) {
	e := start(t, "[limits]\nstreams_per_key = 2\n")
	b := e.browser()
	b.signIn("")
	m := e.inbound("hi", "")
	b.live(m.ChatID)
	b.live(m.ChatID)
	if resp := b.openLive(m.ChatID); resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") != "30" {
		t.Errorf("a third live stream: %d (Retry-After %q), want 429", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	other := e.browser()
	other.signIn("")
	other.live(m.ChatID)
}

// Whatever a contact writes, in a text or a file's name, each change comes
// as exactly one event, whose data shows exactly what was written: a CR
// stays a CR (&#13;), and nothing starts a field or an event of its own.
func TestLiveFraming(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	b.signIn("")
	first := e.inbound("hello", "")
	_, r := b.live(first.ChatID)
	escape := func(s string) string { return strings.ReplaceAll(template.HTMLEscapeString(s), "\r", "&#13;") }
	for _, text := range []string{
		"cr\rdata: <b>forged</b>\r\revent: messages\r", "lf\ndata: forged\n\n", "crlf\r\nid: 1\r\n\r\n",
		"u2028\u2028and\u2029", "nul\x00", "mixed\n\r\r\n\n:comment\rretry: 1\r",
	} {
		e.inbound(text, "")
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("after %q: %v", text, err)
		}
		if want := `>` + escape(text) + `</p>`; ev.Name != "messages" || !strings.Contains(ev.Data, want) {
			t.Errorf("after %q the event is %s %q, want one holding %q", text, ev.Name, ev.Data, want)
		}
	}
	// A file's name: as the API gives it, in the event.
	path := filepath.Join(t.TempDir(), "evil\rdata: x\n\nname.png")
	if err := os.WriteFile(path, []byte("\x89PNG"), 0o600); err != nil {
		t.Fatal(err)
	}
	m := e.inbound("", path)
	ev, err := r.Next()
	if err != nil || len(m.Attachments) != 1 || m.Attachments[0].Filename == nil {
		t.Fatalf("after a file: %v %+v", err, m.Attachments)
	}
	if name := *m.Attachments[0].Filename; !strings.Contains(ev.Data, `alt="`+escape(name)+`"`) {
		t.Errorf("the file %q shows as %q", name, ev.Data)
	}
}

// Who is typing shows on the chat's live stream as they start, and goes
// when they stop: typing is no event, the stream follows it on its own.
func TestLiveTyping(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	b.signIn("")
	m := e.inbound("hello", "")
	_, r := b.live(m.ChatID)
	shown := `<p class="typing" id="typing"><bdi>&#43;` + alice[1:] + `</bdi> is typing…</p>`
	for _, state := range []string{"on", "off"} {
		if err := e.adminDo("POST", "/sim/typing", api.SimTyping{Line: mainLine, From: alice, State: state}, nil); err != nil {
			t.Fatal(err)
		}
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("typing %s: %v", state, err)
		}
		if got := strings.Contains(ev.Data, shown); got != (state == "on") || !strings.Contains(ev.Data, ">hello</p>") {
			t.Errorf("typing %s: the chat shows %q, want the messages and the indicator %v", state, ev.Data, state == "on")
		}
	}
	// The page itself shows it too.
	if err := e.adminDo("POST", "/sim/typing", api.SimTyping{Line: mainLine, From: alice, State: "on"}, nil); err != nil {
		t.Fatal(err)
	}
	if page := b.do("GET", "/dashboard/chats/"+m.ChatID, nil).body; !strings.Contains(page, shown) {
		t.Errorf("the chat's page does not show alice typing:\n%s", page)
	}
}

// Someone who starts typing between the page and its live stream is shown
// by the stream's first event.
func TestLiveTypingBeforeTheStream(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	b.signIn("")
	m := e.inbound("hello", "")
	page := b.do("GET", "/dashboard/chats/"+m.ChatID, nil).body
	live := regexp.MustCompile(`data-live="([^"]+)"`).FindStringSubmatch(page)
	if live == nil || strings.Contains(page, `class="typing"`) {
		t.Fatalf("the chat's page: no live stream, or someone typing\n%s", page)
	}
	if err := e.adminDo("POST", "/sim/typing", api.SimTyping{Line: mainLine, From: alice, State: "on"}, nil); err != nil {
		t.Fatal(err)
	}
	resp := b.openStream(html.UnescapeString(live[1]))
	ev, err := sse.NewReader(resp.Body).Next()
	if err != nil || !strings.Contains(ev.Data, `<p class="typing" id="typing">`) {
		t.Errorf("the stream's first event: %q %v, want alice typing", ev.Data, err)
	}
}
