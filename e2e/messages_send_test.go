package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
	"github.com/blueline-app/blueline/testkit"
)

// answeringOsascript is a stand-in osascript that waits for its answer: it
// spools its script and argv like osascriptStandIn, then waits until the
// test (playing Messages) writes "<exit status>\n<stderr>" beside them. A
// run the test never answers hangs until the daemon kills it.
const answeringOsascript = `#!/bin/sh
req=$(mktemp "$BLUELINE_OSA_SPOOL/req.XXXXXX")
cat > "$req.script"
for a in "$@"; do printf '%s\0' "$a"; done > "$req.args"
mv "$req" "$req.ready"
while [ ! -f "$req.reply" ]; do sleep 0.01; done
tail -n +2 "$req.reply" >&2
exit "$(head -n 1 "$req.reply")"
`

// osaKinds name what an osascript run does, by what its script says.
var osaKinds = []struct{ says, kind string }{
	{"send messageText to chat id", "text→chat"},
	{"send messageText to participant", "text→participant"},
	{"send attachmentFile to chat id", "file→chat"},
	{"send attachmentFile to participant", "file→participant"},
	{"count of chats", "ping"},
	{"get name", "name"}, // answered by AppleScript alone: no ping
	{"launch application", "launch"},
	{"to quit", "quit"},
}

// osaKind names what an osascript run does, from its script.
func osaKind(script string) string {
	for _, k := range osaKinds {
		if strings.Contains(script, k.says) {
			return k.kind
		}
	}
	return "unknown"
}

// answer is what the stand-in does for one run.
type answer struct {
	exit   int
	stderr string
	hang   bool   // never answer: the daemon must kill the run
	then   func() // what Messages writes to chat.db after answering
}

var accepted = answer{}

// notFoundAnswer is osascript's failure for a chat Messages does not know.
func notFoundAnswer(target string) answer {
	return answer{exit: 1, stderr: fmt.Sprintf("0:180: execution error: Messages got an error: Can’t get chat id \"%s\". (-1728)", target)}
}

var notRunningAnswer = answer{exit: 1, stderr: "0:90: execution error: Messages got an error: Application isn’t running. (-600)"}

// messagesApp plays the Messages app behind the stand-in: each run is
// recorded and answered by the test's handler, in the order they come.
type messagesApp struct {
	*fakeMac
	mu      sync.Mutex
	runs    []osaRun
	handler func(n int, run osaRun) answer
	done    chan struct{}
}

func newMessagesApp(t testing.TB, handler func(n int, run osaRun) answer) *messagesApp {
	mac := newFakeMac(t)
	writeFile(t, mac.osa, answeringOsascript)
	app := &messagesApp{fakeMac: mac, handler: handler, done: make(chan struct{})}
	stopped := make(chan struct{})
	t.Cleanup(func() { close(app.done); <-stopped })
	go func() {
		defer close(stopped)
		answered := map[string]bool{}
		for {
			select {
			case <-app.done:
				return
			case <-time.After(5 * time.Millisecond):
			}
			entries, _ := os.ReadDir(mac.spool)
			for _, e := range entries {
				name, ok := strings.CutSuffix(e.Name(), ".ready")
				if !ok || answered[name] {
					continue
				}
				answered[name] = true
				base := filepath.Join(mac.spool, name)
				script, _ := os.ReadFile(base + ".script")
				args, _ := os.ReadFile(base + ".args")
				run := osaRun{script: string(script), args: strings.Split(strings.TrimSuffix(string(args), "\x00"), "\x00")}
				app.mu.Lock()
				app.runs = append(app.runs, run)
				n, h := len(app.runs), app.handler
				app.mu.Unlock()
				a := h(n, run)
				if a.hang {
					continue
				}
				reply := fmt.Sprintf("%d\n%s\n", a.exit, a.stderr)
				if err := os.WriteFile(base+".tmp", []byte(reply), 0o600); err == nil {
					os.Rename(base+".tmp", base+".reply")
				}
				if a.then != nil {
					// Under mu, so that what then writes (the GUID of its
					// row) happens before the test's next checkRuns or
					// kinds, after which it reads it.
					app.mu.Lock()
					a.then()
					app.mu.Unlock()
				}
			}
		}
	}()
	return app
}

func (a *messagesApp) setHandler(h func(n int, run osaRun) answer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.runs, a.handler = nil, h
}

// arg is argument i (0 is "-") of run n (from 0) since the handler was set.
func (a *messagesApp) arg(n, i int) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.runs[n].args[i]
}

// kinds lists the runs since the handler was set, by kind.
func (a *messagesApp) kinds() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]string, len(a.runs))
	for i, r := range a.runs {
		out[i] = osaKind(r.script)
	}
	return out
}

// checkRuns asserts exactly the osascript runs made: a duplicate send is
// a test failure.
func (a *messagesApp) checkRuns(t testing.TB, want ...string) {
	t.Helper()
	if got := a.kinds(); !slices.Equal(got, want) {
		t.Fatalf("osascript runs %v, want %v", got, want)
	}
}

// sendRow is Messages writing our outgoing row into chat (zero: under no
// chat, with the contact as handle) and marking it sent.
func (a *messagesApp) sendRow(chat chatdbtest.ChatRef, contact, text string) string {
	_, guid := a.db.Insert(chatdbtest.Msg{Chat: chat, Text: text, HandleOf: contact})
	a.db.MarkSent(guid)
	return guid
}

// macDaemon starts a daemon with the Mac's line (extra TOML is added to the
// line's table) and waits until contact wrote to it, so that it may be
// messaged.
func (a *messagesApp) macDaemon(t testing.TB, lineExtra, extra string, contact string, chat chatdbtest.ChatRef) (*testDaemon, string) {
	t.Helper()
	td := startTestDaemon(t, a.config(freeTCPPort(t))+lineExtra+"\n"+extra)
	key := td.key()
	a.db.Insert(chatdbtest.Msg{Chat: chat, From: contact, Text: "hi there"})
	testkit.Eventually(t, 10*time.Second, func() bool { return len(td.messagesOf(key, chat.Identifier)) > 0 })
	return td, key
}

const fastSends = `send_timeout = "2s"`

func TestMessagesSendFindsTheRowWhereMessagesFiledIt(t *testing.T) {
	const alice = "+15551230001"
	var app *messagesApp
	app = newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	td, key := app.macDaemon(t, fastSends, "", alice, dm)
	chatID := td.messagesOf(key, alice)[0]["chat_id"]

	smsChat := app.db.DirectChat("sms", alice)
	anyChat := app.db.ChatWithGUID("any;-;"+alice, "iMessage", alice)
	for _, tc := range []struct {
		name     string
		chat     chatdbtest.ChatRef // where Messages files the row
		chatGUID any                // what the outbox item reports
		service  string
	}{
		{"the SMS chat of the same handle (a downgrade)", smsChat, "SMS;-;" + alice, "sms"},
		{"a new any; chat for the same handle", anyChat, "any;-;" + alice, "imessage"},
		{"no chat at all", chatdbtest.ChatRef{}, "iMessage;-;" + alice, "imessage"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			text := "filed under " + tc.name
			var guid string
			app.setHandler(func(n int, run osaRun) answer {
				return answer{then: func() { guid = app.sendRow(tc.chat, alice, text) }}
			})
			obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": text})
			item := td.waitOutbox(key, obx["id"].(string))
			if item["status"] != "sent" || item["chat_guid"] != tc.chatGUID || item["service"] != tc.service || item["sms_fallback"] != false {
				t.Fatalf("item: %v", item)
			}
			app.checkRuns(t, "text→chat")
			msgs := td.messagesOf(key, alice)
			last := msgs[len(msgs)-1]
			if last["guid"] != guid || last["text"] != text || last["outbox_id"] != obx["id"] || last["chat_id"] != chatID {
				t.Fatalf("stored: %v", last)
			}
		})
	}
}

func TestMessagesSendMatchesALinkSplitInTwo(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	rc := newReceiver(t, nil)
	td, key := app.macDaemon(t, fastSends, webhookConfig(t, rc, ""), alice, dm)
	td.register(key, macLine, rc, "message.sent", "message.received")

	text := "Look at this: https://example.com/a?b=1"
	var first string
	app.setHandler(func(int, osaRun) answer {
		return answer{then: func() {
			// Messages writes the text before the link and the link (a
			// preview balloon) as two rows.
			first = app.sendRow(dm, alice, "Look at this:")
			app.sendRow(dm, alice, "https://example.com/a?b=1")
		}}
	})
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": text})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("item: %v", item)
	}
	app.checkRuns(t, "text→chat")
	// The second row is ours too: never reported as sent from elsewhere.
	app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "sentinel"})
	got := rc.waitRequests(2)
	if got[0].Event() != "message.sent" || got[0].Data()["guid"] != first || got[0].Data()["text"] != text ||
		got[1].Data()["text"] != "sentinel" {
		t.Fatalf("events: %s / %s", got[0].Raw, got[1].Raw)
	}
	if n := len(td.messagesOf(key, alice)); n != 3 {
		t.Errorf("%d messages stored, want 3 (hi, the split send, sentinel)", n)
	}
}

func TestMessagesSendWithNoRowIsFailedNotRetried(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	td, key := app.macDaemon(t, fastSends, "", alice, dm)

	app.setHandler(func(int, osaRun) answer { return accepted }) // accepted, and nothing written
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "into the void"})
	item := td.waitOutbox(key, obx["id"].(string))
	if item["status"] != "failed" || item["attempts"] != float64(1) || !strings.Contains(fmt.Sprint(item["error"]), "outcome unknown") ||
		!strings.Contains(fmt.Sprint(item["error"]), "not sent again") {
		t.Fatalf("item: %v", item)
	}
	// A later send goes through; the failed one was never tried again.
	app.setHandler(func(int, osaRun) answer { return answer{then: func() { app.sendRow(dm, alice, "next") }} })
	next := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "next"})
	if item := td.waitOutbox(key, next["id"].(string)); item["status"] != "sent" {
		t.Fatalf("next: %v", item)
	}
	app.checkRuns(t, "text→chat")
	if item := td.call("GET", "/v1/outbox?id="+obx["id"].(string), key, nil).Body; item["status"] != "failed" || item["attempts"] != float64(1) {
		t.Fatalf("the unknown send changed: %v", item)
	}
}

func TestMessagesTahoeChatGUIDs(t *testing.T) {
	const bob, carol = "+15551230002", "+15551230003"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	// Bob's chat is first seen service-prefixed, then under macOS 26's
	// any; form: one API chat.
	bobDM := app.db.DirectChat("imessage", bob)
	td, key := app.macDaemon(t, fastSends, "", bob, bobDM)
	bobAny := app.db.ChatWithGUID("any;-;"+bob, "iMessage", bob)
	app.db.Insert(chatdbtest.Msg{Chat: bobAny, From: bob, Text: "from the any; chat"})
	testkit.Eventually(t, 10*time.Second, func() bool { return len(td.messagesOf(key, bob)) == 2 })
	if msgs := td.messagesOf(key, bob); msgs[0]["chat_id"] != msgs[1]["chat_id"] {
		t.Fatalf("one conversation became two chats: %v", msgs)
	}

	// A group stored only as any;+;chat…: addressed by its iMessage form.
	group := app.db.ChatWithGUID("any;+;chat900000000000000001", "iMessage", bob, carol)
	app.db.Insert(chatdbtest.Msg{Chat: group, From: carol, Text: "group hello"})
	var groupID string
	testkit.Eventually(t, 10*time.Second, func() bool {
		for _, c := range td.call("GET", "/v1/chats?from="+macLine, key, nil).Data() {
			if c["is_group"] == true {
				groupID = c["id"].(string)
			}
		}
		return groupID != ""
	})
	sendToGroup := func(text string, refuse ...string) map[string]any {
		t.Helper()
		app.setHandler(func(n int, run osaRun) answer {
			if slices.Contains(refuse, run.args[1]) {
				return notFoundAnswer(run.args[1])
			}
			return answer{then: func() { app.sendRow(group, "", text) }}
		})
		obx := td.send(key, map[string]any{"from": macLine, "to": groupID, "text": text})
		return td.waitOutbox(key, obx["id"].(string))
	}
	const imsgForm, anyForm = "iMessage;+;chat900000000000000001", "any;+;chat900000000000000001"

	// The stand-in refuses the any; form, as macOS 26 AppleScript does: it
	// is never needed.
	if item := sendToGroup("first", anyForm); item["status"] != "sent" || item["chat_guid"] != anyForm {
		t.Fatalf("group send: %v", item)
	}
	app.checkRuns(t, "text→chat")
	if got := app.arg(0, 1); got != imsgForm {
		t.Fatalf("addressed %q first, want %q", got, imsgForm)
	}
	// -1728 on the service-prefixed form: the stored form is tried next.
	if item := sendToGroup("second", imsgForm); item["status"] != "sent" {
		t.Fatalf("group send: %v", item)
	}
	app.checkRuns(t, "text→chat", "text→chat")
	if a, b := app.arg(0, 1), app.arg(1, 1); a != imsgForm || b != anyForm {
		t.Fatalf("forms tried %q then %q", a, b)
	}
	// Refused on every form: failed for good, each form tried once.
	if item := sendToGroup("third", imsgForm, anyForm); item["status"] != "failed" || item["attempts"] != float64(1) ||
		!strings.Contains(fmt.Sprint(item["error"]), "no such chat") {
		t.Fatalf("group send: %v", item)
	}
	app.checkRuns(t, "text→chat", "text→chat")

	// A one-to-one chat falls back to the participant form last.
	app.setHandler(func(n int, run osaRun) answer {
		if osaKind(run.script) == "text→chat" {
			return notFoundAnswer(run.args[1])
		}
		return answer{then: func() { app.sendRow(bobAny, bob, "by participant") }}
	})
	obx := td.send(key, map[string]any{"from": macLine, "to": bob, "text": "by participant"})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("participant send: %v", item)
	}
	app.checkRuns(t, "text→chat", "text→chat", "text→participant")
	if app.arg(0, 1) != "iMessage;-;"+bob || app.arg(1, 1) != "any;-;"+bob || app.arg(2, 1) != bob || app.arg(2, 3) != "iMessage" {
		t.Fatalf("forms: %q %q %q", app.arg(0, 1), app.arg(1, 1), app.arg(2, 1))
	}
}

func TestMessagesLateNotDelivered(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	rc, four := newReceiver(t, nil), newReceiver(t, nil)
	td, key := app.macDaemon(t, fastSends, webhookConfig(t, rc, ""), alice, dm)
	td.register(key, macLine, rc, "message.failed")
	td.register(key, macLine, four, "message.received", "message.sent", "reaction.added", "reaction.removed")

	var guid string
	app.setHandler(func(int, osaRun) answer { return answer{then: func() { guid = app.sendRow(dm, alice, "hello") }} })
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "hello"})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("item: %v", item)
	}
	four.waitRequests(1) // message.sent
	app.db.MarkError(guid, 22)
	failed := rc.waitRequests(1)[0]
	if failed.Err != nil || failed.Event() != "message.failed" || failed.Data()["guid"] != guid || failed.Data()["outbox_id"] != obx["id"] ||
		!strings.Contains(fmt.Sprint(failed.Data()["error"]), "Not Delivered") || failed.Data()["failed_at"] == nil {
		t.Fatalf("message.failed: %v %s", failed.Err, failed.Raw)
	}
	item := td.call("GET", "/v1/outbox?id="+obx["id"].(string), key, nil).Body
	if item["status"] != "failed" || !strings.Contains(fmt.Sprint(item["error"]), "error 22") {
		t.Fatalf("item after the late failure: %v", item)
	}
	msgs := td.messagesOf(key, alice)
	if m := msgs[len(msgs)-1]; m["guid"] != guid || m["failed_at"] == nil || m["error"] == nil {
		t.Fatalf("message after the late failure: %v", m)
	}
	// The receiver built on the four reference events never sees it.
	app.db.Insert(chatdbtest.Msg{Chat: dm, From: alice, Text: "sentinel"})
	if got := four.waitRequests(2); len(got) != 2 || got[1].Event() != "message.received" {
		t.Fatalf("the four-event receiver got %s", got[len(got)-1].Raw)
	}
	app.checkRuns(t, "text→chat")
}

func TestMessagesHungMessagesIsRelaunched(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	td, key := app.macDaemon(t, fastSends, "", alice, dm)

	// Messages hangs: the send and the ping after it time out. Quit and
	// launch; the send, which chat.db shows never went out, goes once more.
	hung := true
	app.setHandler(func(n int, run osaRun) answer {
		switch kind := osaKind(run.script); {
		case hung && (kind == "text→chat" || kind == "ping"):
			return answer{hang: true}
		case kind == "quit":
			hung = false
			return accepted
		case kind == "text→chat":
			return answer{then: func() { app.sendRow(dm, alice, "are you there") }}
		}
		return accepted
	})
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "are you there"})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" || item["attempts"] != float64(1) {
		t.Fatalf("item: %v", item)
	}
	app.checkRuns(t, "text→chat", "ping", "quit", "launch", "ping", "text→chat")
}

func TestMessagesNotRunningIsLaunched(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	td, key := app.macDaemon(t, fastSends, "", alice, dm)

	// Not running: launch, wait until it answers, send again. Just after
	// the launch it does not know the chat yet (-1728): a pause, then
	// once more.
	sends := 0
	app.setHandler(func(n int, run osaRun) answer {
		if osaKind(run.script) != "text→chat" {
			return accepted
		}
		switch sends++; sends {
		case 1:
			return notRunningAnswer
		case 2:
			return notFoundAnswer(run.args[1])
		}
		return answer{then: func() { app.sendRow(dm, alice, "wake up") }}
	})
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "wake up"})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("item: %v", item)
	}
	app.checkRuns(t, "text→chat", "launch", "ping", "text→chat", "text→chat")
	if app.arg(3, 1) != dm.GUID || app.arg(4, 1) != dm.GUID {
		t.Fatalf("after the launch, sent to %q then %q", app.arg(3, 1), app.arg(4, 1))
	}
}

func TestMessagesSMSFallback(t *testing.T) {
	const alice = "+15551230001"
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("sms_fallback=%v", on), func(t *testing.T) {
			app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
			dm := app.db.DirectChat("imessage", alice)
			smsChat := app.db.DirectChat("sms", alice)
			td, key := app.macDaemon(t, fastSends+fmt.Sprintf("\nsms_fallback = %v", on), "", alice, dm)

			app.setHandler(func(n int, run osaRun) answer {
				if strings.HasPrefix(run.args[1], "iMessage;") {
					// Not on iMessage: Messages fails the row, never sent.
					return answer{then: func() {
						_, guid := app.db.Insert(chatdbtest.Msg{Chat: dm, Text: "via whatever works"})
						app.db.MarkError(guid, 22)
					}}
				}
				return answer{then: func() { app.sendRow(smsChat, alice, "via whatever works") }}
			})
			obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "via whatever works"})
			item := td.waitOutbox(key, obx["id"].(string))
			if !on {
				if item["status"] != "failed" || !strings.Contains(fmt.Sprint(item["error"]), "Not Delivered") || item["sms_fallback"] != false {
					t.Fatalf("item: %v", item)
				}
				app.checkRuns(t, "text→chat")
				return
			}
			if item["status"] != "sent" || item["sms_fallback"] != true || item["service"] != "sms" || item["chat_guid"] != smsChat.GUID {
				t.Fatalf("item: %v", item)
			}
			app.checkRuns(t, "text→chat", "text→chat")
			if app.arg(1, 1) != smsChat.GUID {
				t.Fatalf("fallback sent to %q", app.arg(1, 1))
			}
			msgs := td.messagesOf(key, alice)
			if m := msgs[len(msgs)-1]; m["service"] != "sms" || m["outbox_id"] != obx["id"] {
				t.Fatalf("stored: %v", m)
			}
		})
	}
}

func TestMessagesSendHandedOverBeforeAStopIsNeverSentAgain(t *testing.T) {
	const alice = "+15551230001"
	for _, written := range []bool{true, false} {
		t.Run(fmt.Sprintf("row written=%v", written), func(t *testing.T) {
			app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
			dm := app.db.DirectChat("imessage", alice)
			td, key := app.macDaemon(t, fastSends, "", alice, dm)

			// The daemon stops while osascript is running: whether Messages
			// took the message is unknown.
			app.setHandler(func(int, osaRun) answer { return answer{hang: true} })
			obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "once only"})
			testkit.Eventually(t, 10*time.Second, func() bool { return len(app.kinds()) == 1 })
			td.stop()
			var guid string
			if written {
				guid = app.sendRow(dm, alice, "once only")
			}
			td.start()
			item := td.waitOutbox(key, obx["id"].(string))
			app.checkRuns(t, "text→chat")
			if written {
				msgs := td.messagesOf(key, alice)
				if item["status"] != "sent" || msgs[len(msgs)-1]["guid"] != guid || msgs[len(msgs)-1]["outbox_id"] != obx["id"] {
					t.Fatalf("item %v, messages %v", item, msgs)
				}
				if n := len(msgs); n != 2 {
					t.Fatalf("%d messages stored, want 2: %v", n, msgs)
				}
				return
			}
			if item["status"] != "failed" || !strings.Contains(fmt.Sprint(item["error"]), "outcome unknown") {
				t.Fatalf("item: %v", item)
			}
		})
	}
}
