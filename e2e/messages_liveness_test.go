package e2e

import (
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/testkit"
)

// macInfo is what /readyz says of the Mac line's bridge (polled: /readyz
// has no rate limit).
func (td *testDaemon) macInfo() string {
	td.t.Helper()
	checks, _ := td.call("GET", "/readyz", "", nil).Body["checks"].(map[string]any)
	c, _ := checks["line "+macLine].(map[string]any)
	info, _ := c["info"].(string)
	return info
}

// macHealth is the Mac line's health summary in GET /v1/lines.
func (td *testDaemon) macHealth(key string) string {
	td.t.Helper()
	for _, l := range td.call("GET", "/v1/lines", key, nil).Data() {
		if l["handle"] == macLine {
			h, _ := l["health"].(map[string]any)
			s, _ := h["summary"].(string)
			return s
		}
	}
	td.t.Fatal("no Mac line in GET /v1/lines")
	return ""
}

// A Messages that hangs while idle still "answers" an application's name
// (AppleScript answers it without Messages): the watchdog pings with what
// Messages itself must answer, finds it hung, and relaunches it before a
// send runs into it.
func TestMessagesWatchdogRelaunchesAHungMessages(t *testing.T) {
	const alice = "+15551230001"
	app := newMessagesApp(t, func(int, osaRun) answer { return accepted })
	app.pingEvery = "300ms"
	dm := app.db.DirectChat("imessage", alice)
	var hung atomic.Bool
	td, key := app.macDaemon(t, fastSends, "", alice, dm)
	// The watchdog's first ping, at the start, finds Messages answering.
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(td.macInfo(), "Messages running") })

	hung.Store(true)
	app.setHandler(func(n int, run osaRun) answer {
		switch kind := osaKind(run.script); {
		case kind == "quit":
			hung.Store(false)
		case hung.Load() && kind != "name":
			return answer{hang: true}
		}
		return accepted
	})
	testkit.Eventually(t, 20*time.Second, func() bool { return slices.Contains(app.kinds(), "launch") && !hung.Load() })
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(td.macInfo(), "Messages running") })
	if h := td.macHealth(key); !strings.Contains(h, "Messages running") {
		t.Errorf("GET /v1/lines: %q", h)
	}
	got := app.kinds()
	if i := slices.Index(got, "quit"); i < 1 || got[i-1] != "ping" || got[i+1] != "launch" || slices.Contains(got, "name") {
		t.Fatalf("runs %v: want a ping that hung, then quit and launch, and never a name query", got)
	}

	// And a send goes out as usual.
	app.setHandler(func(n int, run osaRun) answer {
		if osaKind(run.script) == "text→chat" {
			return answer{then: func() { app.sendRow(dm, alice, "still there") }}
		}
		return accepted
	})
	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "still there"})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("item %v", item)
	}
}

// An Automation prompt nobody answers on a headless Mac: every script
// waits until it is killed. The line says so, and a send waits (pending,
// never handed to Messages) until the prompt is answered, then goes out
// once.
func TestMessagesAutomationPromptPending(t *testing.T) {
	const alice = "+15551230001"
	var answered atomic.Bool
	app := newMessagesApp(t, func(n int, run osaRun) answer {
		if !answered.Load() {
			return answer{hang: true}
		}
		if osaKind(run.script) == "text→chat" {
			return answer{then: func() {}}
		}
		return accepted
	})
	app.pingEvery = "300ms"
	dm := app.db.DirectChat("imessage", alice)
	td, key := app.macDaemon(t, fastSends, "", alice, dm)
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(td.macInfo(), "Automation permission pending") })
	if h := td.macHealth(key); !strings.Contains(h, "Automation permission pending") {
		t.Errorf("GET /v1/lines: %q", h)
	}

	obx := td.send(key, map[string]any{"from": macLine, "to": alice, "text": "hello?"})
	id := obx["id"].(string)
	// It waits: still pending after the watchdog's next pings, and no
	// send was ever run.
	pings := func() int {
		n := 0
		for _, k := range app.kinds() {
			if k == "ping" {
				n++
			}
		}
		return n
	}
	seen := pings()
	testkit.Eventually(t, 20*time.Second, func() bool { return pings() >= seen+2 })
	item := td.call("GET", "/v1/outbox?id="+id, key, nil).Body
	if item["status"] != "pending" || slices.Contains(app.kinds(), "text→chat") {
		t.Fatalf("while the prompt waits: item %v, runs %v", item, app.kinds())
	}
	if !strings.Contains(item["error"].(string), "Automation permission pending") {
		t.Errorf("the item does not say why it waits: %v", item)
	}

	// The owner answers the prompt: the next ping works, the send goes
	// out, once.
	var sent string
	app.setHandler(func(n int, run osaRun) answer {
		if osaKind(run.script) == "text→chat" {
			return answer{then: func() { sent = app.sendRow(dm, alice, "hello?") }}
		}
		return accepted
	})
	answered.Store(true)
	if item := td.waitOutbox(key, id); item["status"] != "sent" || item["attempts"] != float64(1) {
		t.Fatalf("item %v", item)
	}
	n := 0
	for _, k := range app.kinds() {
		if k == "text→chat" {
			n++
		}
	}
	if n != 1 || sent == "" {
		t.Errorf("%d sends run, want 1", n)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(td.macInfo(), "Automation granted") })
}
