package e2e

import (
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// How a conversation reads in the browser: it opens at the newest message
// even with pictures above it that load after the page, a reader who
// scrolled up is not moved by what arrives, who is typing shows, and every
// time is the browser's local time with the UTC time on hover.

// evalJS evaluates a JavaScript expression in the page.
func evalJS[T any](b *browser, what, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("%s: %v (page: %s)", what, err, b.screenshot(what))
	}
	return v
}

// picture writes a PNG of w×h pixels and returns its path.
func picture(t *testing.T, w, h int) string {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, color.RGBA{R: uint8(x), G: uint8(y), B: 200, A: 255})
		}
	}
	path := filepath.Join(t.TempDir(), "picture.png")
	f, err := os.Create(path)
	if err == nil {
		err = png.Encode(f, img)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// signIn signs the host's operator in with a one-time link.
func (b *browser) signIn(td *testDaemon) {
	b.t.Helper()
	link := strings.TrimSpace(td.mustCLI("dashboard", "--no-open"))
	b.do("sign in", chromedp.Navigate(link), chromedp.Click(chromedp.CSS("#link-login button")),
		chromedp.WaitVisible(chromedp.CSS("nav[aria-label=Main]")))
}

// atEnd is whether the conversation's view shows its newest message.
const atEnd = `(() => { const m = document.querySelector("#messages"); return m.scrollHeight - m.scrollTop - m.clientHeight <= 2 })()`

func TestConsoleConversationView(t *testing.T) {
	td := startTestDaemon(t, "")
	// Kolkata is UTC+5:30 all year: a local time that is not the UTC one.
	b := newBrowser(t, chromedp.Env("TZ=Asia/Kolkata"))
	pic := picture(t, 480, 360)
	var chatID string
	for i := range 12 {
		var m map[string]any
		switch i {
		case 3, 11: // a picture far above, and one last, under the fold
			m = td.inbound(mainLine, alice, "", "--attach", pic)
		default:
			m = td.inbound(mainLine, alice, "message "+string(rune('a'+i)))
		}
		chatID = m["chat_id"].(string)
	}

	b.signIn(td)
	b.do("open the conversation", chromedp.Navigate(td.base+"/dashboard/chats/"+chatID), chromedp.WaitVisible(chromedp.CSS("#messages")))
	b.waitFor("the live stream connects", `document.querySelector("#messages").dataset.connected === "true"`)
	// The last picture loads after the page is laid out: the view follows it.
	b.waitFor("the last picture loads", `(() => { const i = [...document.querySelectorAll("#messages img")].pop(); return i.complete && i.naturalHeight > 0 })()`)
	b.waitFor("the view is at the newest message, the picture loaded", atEnd)
	if !evalJS[bool](b, "the conversation scrolls", `document.querySelector("#messages").scrollHeight > 2 * document.querySelector("#messages").clientHeight`) {
		t.Fatal("the conversation fits its box: the test shows nothing about scrolling")
	}

	// Times: local, in one format, UTC on hover.
	type shown struct{ Datetime, Title, Text string }
	times := evalJS[[]shown](b, "the times", `[...document.querySelectorAll("#messages time")].map(t => ({Datetime: t.getAttribute("datetime"), Title: t.title, Text: t.textContent}))`)
	if len(times) < 12 {
		t.Fatalf("the conversation shows %d times, want one per message", len(times))
	}
	kolkata := time.FixedZone("IST", 5*3600+1800)
	for _, tm := range times {
		at, err := time.Parse(time.RFC3339, tm.Datetime)
		if err != nil {
			t.Fatalf("time datetime %q: %v", tm.Datetime, err)
		}
		if want := at.UTC().Format("2006-01-02 15:04:05 UTC"); tm.Title != want {
			t.Errorf("time %s has title %q, want the UTC time %q", tm.Datetime, tm.Title, want)
		}
		if want := at.In(kolkata).Format("2006-01-02 15:04:05"); tm.Text != want {
			t.Errorf("time %s shows %q, want the browser's local time %q", tm.Datetime, tm.Text, want)
		}
	}

	// A reader scrolled up stays where they are as messages arrive; the
	// pictures on the page are kept, not loaded again.
	b.do("scroll up", chromedp.Evaluate[chromedp.Void](`document.querySelector("#messages").scrollTop = 0; window.picture = document.querySelector("#messages img")`))
	b.waitFor("the page sees the reader scrolled up", `document.querySelector("#messages").dataset.following === "false"`)
	td.inbound(mainLine, alice, "while you read above")
	b.waitFor("the new message arrives", `document.querySelector("#messages").textContent.includes("while you read above")`)
	if top := evalJS[float64](b, "where the view is", `document.querySelector("#messages").scrollTop`); top != 0 {
		t.Errorf("a new message moved the view of a reader scrolled up to the top: scrollTop %v", top)
	}
	if !evalJS[bool](b, "the pictures", `document.querySelector("#messages img") === window.picture`) {
		t.Error("a new message replaced the pictures above it")
	}
	b.do("go to the new messages", chromedp.WaitVisible(chromedp.CSS("button.newer")), chromedp.Click(chromedp.CSS("button.newer")))
	b.waitFor("the view is at the newest message again", atEnd)

	// At the end, a new message and who is typing are followed.
	td.mustCLI("sim", "typing", "--line", mainLine, "--from", alice)
	b.waitFor("alice is typing", `(document.querySelector("#typing") || {}).textContent === "`+alice+` is typing…"`)
	b.waitFor("the indicator is in view", atEnd)
	td.inbound(mainLine, alice, "the newest")
	b.waitFor("the newest message arrives", `document.querySelector("#messages").textContent.includes("the newest")`)
	b.waitFor("the view follows it", atEnd)
	if !evalJS[bool](b, "the pictures", `document.querySelector("#messages img") === window.picture`) {
		t.Error("a later update replaced the pictures above it")
	}
	td.mustCLI("sim", "typing", "--line", mainLine, "--from", alice, "--state", "off")
	b.waitFor("alice stopped typing", `document.querySelector("#typing") === null`)
	b.waitFor("the view is at the end", atEnd)

	// A window made shorter keeps the view at the end.
	b.do("a shorter window", chromedp.EmulateViewport(1200, 600))
	b.waitFor("the view is still at the newest message", atEnd)
}

// Every page shows times the same way: the local time, the UTC one on hover.
func TestConsoleTimesAreLocal(t *testing.T) {
	td := startTestDaemon(t, "")
	b := newBrowser(t, chromedp.Env("TZ=Asia/Kolkata"))
	td.inbound(mainLine, alice, "hello")
	td.key()
	b.signIn(td)
	local := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$`)
	for _, path := range []string{"/dashboard/", "/dashboard/chats", "/dashboard/keys"} {
		b.do("open "+path, chromedp.Navigate(td.base+path), chromedp.WaitVisible(chromedp.CSS("main")))
		b.waitFor(path+" shows a time", `document.querySelector("main time") !== null`)
		for _, tm := range evalJS[[][2]string](b, "the times of "+path, `[...document.querySelectorAll("main time")].map(t => [t.title, t.textContent])`) {
			if !strings.HasSuffix(tm[0], " UTC") || !local.MatchString(tm[1]) || strings.TrimSuffix(tm[0], " UTC") == tm[1] {
				t.Errorf("%s shows a time %q titled %q, want the local time, the UTC one as its title", path, tm[1], tm[0])
			}
		}
	}
}
