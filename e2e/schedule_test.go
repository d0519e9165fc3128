package e2e

import (
	"regexp"
	"testing"
	"time"

	"github.com/blueline-app/blueline/testkit"
)

// sentTexts is the texts the simulated network delivered.
func (td *testDaemon) sentTexts() []string {
	var out []string
	for _, o := range td.d.Sim().Delivered() {
		out = append(out, o.Text)
	}
	return out
}

func TestScheduledSendAcrossRestart(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	td.inbound(mainLine, alice, "hi")
	sendAt := time.Now().Add(1500 * time.Millisecond).UnixMilli()
	later := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "at the right time", "send_at": sendAt})
	cancelled := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "never", "send_at": time.Now().Add(time.Hour).UnixMilli()})
	now := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "right away"})
	if later["status"] != "pending" || later["send_at"] != float64(sendAt) {
		t.Fatalf("scheduled: %v", later)
	}
	td.waitOutbox(key, now["id"].(string))

	// The daemon stops and starts again: the scheduled items are still
	// there, pending, and one is cancelled.
	td.stop()
	td.start()
	got := td.call("GET", "/v1/outbox?id="+later["id"].(string), key, nil).Body
	if got["status"] != "pending" && got["status"] != "sent" || got["send_at"] != float64(sendAt) {
		t.Fatalf("after the restart: %v", got)
	}
	r := td.call("POST", "/v1/outbox/cancel", key, map[string]any{"id": cancelled["id"]})
	if r.Status != 200 || r.Body["status"] != "failed" || r.Body["error"] != "canceled" {
		t.Fatalf("cancel: %d %s", r.Status, r.Raw)
	}

	item := td.waitOutbox(key, later["id"].(string))
	if item["status"] != "sent" || item["completed_at"].(float64) < float64(sendAt) {
		t.Fatalf("scheduled item: %v (send_at %d)", item, sendAt)
	}
	msgs := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil).Data()
	if msgs[0]["text"] != "at the right time" || msgs[0]["sent_at"].(float64) < float64(sendAt) {
		t.Errorf("latest message: %v", msgs[0])
	}
	// The cancelled item never reached the network, even after another
	// restart.
	td.stop()
	td.start()
	if got := td.call("GET", "/v1/outbox?id="+cancelled["id"].(string), key, nil).Body; got["status"] != "failed" || got["error"] != "canceled" {
		t.Errorf("cancelled item after a restart: %v", got)
	}
	for _, text := range td.sentTexts() {
		if text == "never" {
			t.Error("the cancelled message was sent")
		}
	}
	if r := td.call("POST", "/v1/outbox/cancel", key, map[string]any{"id": later["id"]}); r.Status != 409 || r.ErrCode() != "outbox_item_not_pending" {
		t.Errorf("cancel a sent item: %d %s", r.Status, r.Raw)
	}
}

// guardedLine is a simulated line with the Apple ID guard turned on.
const guardedLine = "+15550000008"

func TestGuardOnASimLine(t *testing.T) {
	td := startTestDaemon(t, `
[[lines]]
handle = "`+guardedLine+`"
label = "Guarded"
guard = true

[guard]
pace = "300ms"
max_unanswered = 3
`)
	key := td.key()
	td.inbound(guardedLine, alice, "hi")
	td.inbound(mainLine, alice, "hi")
	var ids []string
	for _, text := range []string{"one", "two", "three"} {
		ids = append(ids, td.send(key, map[string]any{"from": guardedLine, "to": alice, "text": text})["id"].(string))
	}
	// The fourth is refused: alice has not answered.
	r := td.call("POST", "/v1/messages", key, map[string]any{"from": guardedLine, "to": alice, "text": "four"})
	if r.Status != 429 || r.ErrCode() != "guard_unanswered_limit" || r.Header.Get("Retry-After") != "" {
		t.Errorf("fourth unanswered: %d %s", r.Status, r.Raw)
	}
	// Other lines are not guarded by default on the simulated network.
	for range 6 {
		td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "unguarded"})
	}
	// Paced: the guarded line's sends are at least 300 ms apart (each
	// message's sent_at is when the network took it).
	for _, id := range ids {
		if item := td.waitOutbox(key, id); item["status"] != "sent" {
			t.Fatalf("item %s: %v", id, item)
		}
	}
	msgs := td.call("GET", "/v1/messages?from="+guardedLine+"&to="+alice, key, nil).Data()
	if len(msgs) != 4 {
		t.Fatalf("%d messages", len(msgs))
	}
	for i := 0; i+1 < 3; i++ { // newest first: msgs[0..2] are ours
		if gap := msgs[i]["sent_at"].(float64) - msgs[i+1]["sent_at"].(float64); gap < 290 {
			t.Errorf("sends %d ms apart, want at least 300", int(gap))
		}
	}
	// Alice answers: sending resumes.
	td.inbound(guardedLine, alice, "yes?")
	td.send(key, map[string]any{"from": guardedLine, "to": alice, "text": "four"})

	// The standing: GET /v1/lines and `blueline lines guard`.
	var guard map[string]any
	for _, l := range td.call("GET", "/v1/lines", key, nil).Data() {
		g := l["guard"].(map[string]any)
		switch l["handle"] {
		case guardedLine:
			guard = g
		default:
			if g["enabled"] != false {
				t.Errorf("%s: guard on by default on the simulated network: %v", l["handle"], g)
			}
		}
	}
	today := guard["today"].(map[string]any)
	if guard["enabled"] != true || guard["pace_ms"] != 300.0 || today["sent"] != 4.0 || today["received"] != 2.0 ||
		guard["limits"].(map[string]any)["max_unanswered"] != 3.0 {
		t.Errorf("guarded line's standing: %v", guard)
	}
	out := td.mustCLI("lines", "guard")
	if !regexp.MustCompile(`(?m)^\` + guardedLine + `\s+on\s+300ms\s+4/20\s+2\s+0/200\s+3$`).MatchString(out) {
		t.Errorf("lines guard:\n%s", out)
	}
	if !regexp.MustCompile(`(?m)^\` + mainLine + `\s+off\s`).MatchString(out) {
		t.Errorf("lines guard, an unguarded line:\n%s", out)
	}
	// Everything accepted went out: 4 paced, 6 not.
	testkit.Eventually(t, 10*time.Second, func() bool { return len(td.sentTexts()) >= 10 })
}

// On a Messages line (a real Apple ID) the guard is on by default, with
// the reference service's numbers.
func TestGuardOnByDefaultOnAMessagesLine(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	dm := app.db.DirectChat("imessage", alice)
	td, key := app.macDaemon(t, fastSends, "", alice, dm)
	for _, l := range td.call("GET", "/v1/lines", key, nil).Data() {
		g := l["guard"].(map[string]any)
		limits := g["limits"].(map[string]any)
		want := l["handle"] == macLine
		if g["enabled"] != want || g["pace_ms"] != 1000.0 || limits["max_unanswered"] != 5.0 || limits["max_ratio"] != 10.0 ||
			limits["max_cold_contacts"] != 200.0 || limits["cold_after_ms"] != 86400000.0 {
			t.Errorf("%s's guard: %v", l["handle"], g)
		}
	}
	for i := range 5 {
		td.send(key, map[string]any{"from": macLine, "to": alice, "text": "unanswered " + string(rune('1'+i))})
	}
	r := td.call("POST", "/v1/messages", key, map[string]any{"from": macLine, "to": alice, "text": "sixth"})
	if r.Status != 429 || r.ErrCode() != "guard_unanswered_limit" {
		t.Errorf("sixth unanswered on a Messages line: %d %s", r.Status, r.Raw)
	}
}
