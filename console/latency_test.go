package console_test

import (
	"regexp"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/testkit"
)

// The overview shows each line's latency over the last day, stage by
// stage: nothing timed at first, then a sent message and its delivered
// receipt.
func TestOverviewShowsLatency(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	b.signIn("")
	// html/template writes the handle's + as &#43;.
	row := regexp.MustCompile(`(?s)<tr>\s*<td><strong><bdi>(\+|&#43;)` + mainLine[1:] + `</bdi></strong>.*?</tr>`)
	mainRow := func() string {
		t.Helper()
		r := row.FindString(b.do("GET", "/dashboard/", nil).body)
		if r == "" {
			t.Fatalf("no row of %s on the overview", mainLine)
		}
		return r
	}
	for _, stage := range []string{"accept → sent", "received → webhook", "sent → delivered"} {
		if r := mainRow(); !regexp.MustCompile(stage + `: none timed`).MatchString(r) {
			t.Fatalf("before any traffic, %s: %s", stage, r)
		}
	}

	if err := e.adminDo("POST", "/sim/inbound", api.SimInbound{Line: mainLine, From: alice, Text: "hi"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.adminDo("POST", "/v1/messages", map[string]string{"from": mainLine, "to": alice, "text": "hello"}, nil); err != nil {
		t.Fatal(err)
	}
	one := func(stage string) *regexp.Regexp {
		return regexp.MustCompile(stage + `: p50 \d[\d.]* ?(ms|s|m\d+s|h\d+m\d+s) · p99 \d[\d.]* ?(ms|s|m\d+s|h\d+m\d+s) \(1\)`)
	}
	testkit.Eventually(t, 10*time.Second, func() bool { return one("accept → sent").MatchString(mainRow()) })
	// Counted once recorded as sent: the contact's phone has it.
	if err := e.adminDo("POST", "/sim/read", api.SimRead{Line: mainLine, From: alice, DeliveredOnly: true}, nil); err != nil {
		t.Fatal(err)
	}
	if r := mainRow(); !one("sent → delivered").MatchString(r) || !regexp.MustCompile(`received → webhook: none timed`).MatchString(r) {
		t.Errorf("after a delivered receipt, without webhooks: %s", r)
	}
}
