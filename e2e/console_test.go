package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/blueline-app/blueline/testkit"
)

// The console, driven in a real headless Chromium (Debian's chromium;
// .ci/run installs it). Without one the test is skipped, unless
// BLUELINE_BROWSER_TESTS=require (as .ci/run sets) makes that a failure.

// browser is a headless Chromium tab.
type browser struct {
	t   *testing.T
	ctx context.Context
}

func findChromium() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// newBrowser starts a headless Chromium; extra options (its environment,
// say) are added to the defaults.
func newBrowser(t *testing.T, extra ...chromedp.ExecAllocatorOption) *browser {
	t.Helper()
	path := findChromium()
	if path == "" {
		if os.Getenv("BLUELINE_BROWSER_TESTS") == "require" {
			t.Fatal("no chromium on PATH, and BLUELINE_BROWSER_TESTS=require: install Debian's chromium (apt-get install chromium)")
		}
		t.Skip("no chromium on PATH: the console's browser tests need one (apt-get install chromium); .ci/run installs it")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI containers run as root, where Chromium's sandbox cannot start
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1200, 900),
	)
	opts = append(opts, extra...)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() {
		cancel()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		t.Fatalf("start chromium: %v", err)
	}
	return &browser{t: t, ctx: ctx}
}

// screenshotDir is where failing steps leave a screenshot of the page.
func screenshotDir() string {
	if d := os.Getenv("BLUELINE_SCREENSHOTS"); d != "" {
		return d
	}
	return filepath.Join(os.TempDir(), "blueline-console-screenshots")
}

// do runs steps; on failure it saves a screenshot of the page and fails
// the test, naming both.
func (b *browser) do(what string, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v (page: %s)", what, err, b.screenshot(what))
	}
}

// text is the text of the first element sel matches.
func (b *browser) text(what, sel string) string {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("%s: %v (page: %s)", what, err, b.screenshot(what))
	}
	return s
}

// waitFor polls a JavaScript condition.
func (b *browser) waitFor(what, cond string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](cond, chromedp.WithPollingInterval(50*time.Millisecond), chromedp.WithPollingTimeout(15*time.Second))); err != nil {
		b.t.Fatalf("%s: %v (page: %s)", what, err, b.screenshot(what))
	}
}

// phoneWidth checks that the page fits a phone's width (tables scroll in
// their own box), then goes back to the desktop's.
func (b *browser) phoneWidth(what string) {
	b.t.Helper()
	b.do(what+" at phone width", chromedp.EmulateViewport(375, 800))
	b.waitFor(what+" fits a phone's width", `document.documentElement.scrollWidth <= document.documentElement.clientWidth`)
	b.do(what+" at desktop width", chromedp.EmulateViewport(1200, 900))
}

func (b *browser) screenshot(what string) string {
	dir := filepath.Join(screenshotDir(), b.t.Name())
	name := regexp.MustCompile(`[^a-zA-Z0-9]+`).ReplaceAllString(what, "-") + ".png"
	return b.save(dir, name)
}

func (b *browser) save(dir, name string) string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // quality 100 is a PNG; less, a JPEG
	if err != nil {
		return "no screenshot: " + err.Error()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err.Error()
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, png, 0o644); err != nil {
		return err.Error()
	}
	return p
}

// The walk the issue names: sign in with a one-time link, create a key and
// use it, see an inbound message arrive in the open chat without a reload,
// reply and see the outbox item reach sent, create a webhook to a local
// receiver, see its delivery and redeliver it, revoke the key and see the
// API refuse it.
func TestConsoleInABrowser(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	b := newBrowser(t)

	// The link opens a page with a button, which a person presses: nothing
	// signs in by itself (TestSignInNeedsTheButton).
	link := strings.TrimSpace(td.mustCLI("dashboard", "--no-open"))
	b.do("sign in with the link", chromedp.Navigate(link), chromedp.Click(chromedp.CSS("#link-login button")),
		chromedp.WaitVisible(chromedp.CSS("nav[aria-label=Main]")))
	if h := b.text("overview", "h1"); h != "Overview" {
		t.Fatalf("after sign-in the page is %q, want the overview", h)
	}
	if got := b.text("overview lines", "main table"); !strings.Contains(got, mainLine) || !strings.Contains(got, "running") {
		t.Errorf("the overview's lines table shows %q, want %s running", got, mainLine)
	}
	if dir := os.Getenv("BLUELINE_README_SCREENSHOTS"); dir != "" {
		b.save(dir, "console-overview.png")
	}
	b.phoneWidth("the overview")
	// The link is spent.
	b.do("reuse the link", chromedp.Navigate(link), chromedp.Click(chromedp.CSS("#link-login button")),
		chromedp.WaitVisible(chromedp.CSS(".error")))
	if got := b.text("reused link", ".error"); !strings.Contains(got, "unknown, used or expired") {
		t.Errorf("a used link says %q", got)
	}

	// A key, created and used.
	b.do("create a key",
		chromedp.Navigate(td.base+"/dashboard/keys"),
		chromedp.SetValue(chromedp.CSS("#create-key input[name=label]"), "from the console"),
		chromedp.Submit(chromedp.CSS("#create-key")),
		chromedp.WaitVisible(chromedp.CSS("#new-key")))
	key := b.text("the new key", "#new-key")
	if !strings.HasPrefix(key, "sk_live_") {
		t.Fatalf("the console showed key %q", key)
	}
	if r := td.call("GET", "/v1/lines", key, nil); r.Status != 200 {
		t.Fatalf("GET /v1/lines with the console's key: %d %s", r.Status, r.Raw)
	}
	// Listed by its hint, and when it was last used.
	testkit.Eventually(t, 15*time.Second, func() bool {
		b.do("the keys page", chromedp.Navigate(td.base+"/dashboard/keys"), chromedp.WaitVisible(chromedp.CSS("tr[data-key]")))
		if row := b.text("the key's row", "tr[data-key]"); !strings.Contains(row, "sk_live_…"+key[len(key)-4:]) {
			t.Fatalf("the key's row %q does not show its hint", row)
		}
		return b.text("the key's last use", "tr[data-key] td:nth-child(7)") != "—"
	})

	// A contact writes, from the simulator page; the chat is opened.
	b.do("simulate an inbound message",
		chromedp.Navigate(td.base+"/dashboard/simulator"),
		chromedp.SetValue(chromedp.CSS("#sim-inbound select[name=line]"), mainLine),
		chromedp.SetValue(chromedp.CSS("#sim-inbound input[name=from]"), alice),
		chromedp.SetValue(chromedp.CSS("#sim-inbound textarea[name=text]"), "hello from alice"),
		chromedp.Submit(chromedp.CSS("#sim-inbound")),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	b.do("open the conversation",
		chromedp.Click(chromedp.CSS(`a[href^="/dashboard/chats/cht_"]`)),
		chromedp.WaitVisible(chromedp.CSS("#messages")))
	b.waitFor("the live stream connects", `document.querySelector("#messages").dataset.connected === "true"`)
	if got := b.text("the chat", "#messages"); !strings.Contains(got, "hello from alice") {
		t.Fatalf("the chat shows %q", got)
	}
	// A mark on the window: a reload would lose it.
	b.do("mark the page", chromedp.Evaluate[chromedp.Void](`window.notReloaded = true`))
	td.inbound(mainLine, alice, "a second message, live")
	b.waitFor("the new message appears", `document.querySelector("#messages").textContent.includes("a second message, live")`)
	b.waitFor("without a reload", `window.notReloaded === true`)

	b.phoneWidth("the conversation")
	// A reply, through the API's rules, out to the network.
	b.do("reply",
		chromedp.SetValue(chromedp.CSS("#reply-text"), "an answer from the console"),
		chromedp.Submit(chromedp.CSS("#reply")),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	if dir := os.Getenv("BLUELINE_README_SCREENSHOTS"); dir != "" {
		b.save(dir, "console-conversation.png")
	}
	obx := regexp.MustCompile(`obx_[a-z2-7]{26}`).FindString(b.text("the reply's notice", ".notice"))
	if obx == "" {
		t.Fatalf("the reply's notice names no outbox item")
	}
	b.do("open the outbox", chromedp.Navigate(td.base+"/dashboard/outbox"), chromedp.WaitVisible(chromedp.CSS("#outbox")))
	testkit.Eventually(t, 15*time.Second, func() bool {
		b.do("reload the outbox", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#outbox")))
		return b.text("the reply's item", `tr[data-outbox="`+obx+`"] td:nth-child(4)`) == "sent"
	})
	if sent := td.d.Sim().Delivered(); len(sent) == 0 || sent[len(sent)-1].Text != "an answer from the console" {
		t.Errorf("the simulated network got %+v, want the reply last", sent)
	}

	// A webhook to a local receiver; its delivery; a redelivery.
	b.do("create a webhook",
		chromedp.Navigate(td.base+"/dashboard/webhooks"),
		chromedp.SetValue(chromedp.CSS("#create-webhook select[name=line]"), mainLine),
		chromedp.SetValue(chromedp.CSS("#create-webhook input[name=url]"), rc.Server.URL+"/hook"),
		chromedp.Submit(chromedp.CSS("#create-webhook")),
		chromedp.WaitVisible(chromedp.CSS("#new-secret")))
	rc.SetSecret(b.text("the webhook's secret", "#new-secret"))
	td.inbound(mainLine, alice, "for the webhook")
	first := rc.waitRequests(1)
	b.do("open the webhook", chromedp.Click(chromedp.CSS(`a[href^="/dashboard/webhooks/wh_"]`)), chromedp.WaitVisible(chromedp.CSS("#attempts")))
	testkit.Eventually(t, 15*time.Second, func() bool {
		b.do("reload the webhook", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS("#attempts")))
		return strings.Contains(b.text("the attempts", "#attempts tbody"), "200")
	})
	b.do("redeliver",
		chromedp.Submit(chromedp.CSS(`#attempts tbody tr:first-child form`)),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	again := rc.waitRequests(len(first) + 1)
	if got, want := again[len(again)-1].Header.Get("X-Webhook-Delivery-Id"), first[len(first)-1].Header.Get("X-Webhook-Delivery-Id"); got == "" || got != want {
		t.Errorf("the redelivery carries delivery %q, want the first one's %q", got, want)
	}

	// A webhook of every line the key may use (the reference CLI's
	// `webhooks create` without --line) is one row, with its lines.
	every := td.call("POST", "/v1/webhooks", key, map[string]any{"from": "", "url": rc.Server.URL + "/every", "events": []string{"message.received"}})
	if every.Status != 201 {
		t.Fatalf("a webhook of every line: %d %s", every.Status, every.Raw)
	}
	id := every.Body["id"].(string)
	b.do("list the webhooks", chromedp.Navigate(td.base+"/dashboard/webhooks"), chromedp.WaitVisible(chromedp.CSS(`tr[data-webhook="`+id+`"]`)))
	if rows := b.text("the webhooks", "main table tbody"); strings.Count(rows, id) != 1 {
		t.Errorf("the webhook of every line is listed %d times:\n%s", strings.Count(rows, id), rows)
	}
	if got := b.text("its lines", `tr[data-webhook="`+id+`"] td:nth-child(2)`); !strings.Contains(got, mainLine) || !strings.Contains(got, plainLine) {
		t.Errorf("its lines show %q, want %s and %s among them", got, mainLine, plainLine)
	}

	// The key, revoked, is refused.
	b.do("revoke the key",
		chromedp.Navigate(td.base+"/dashboard/keys"),
		chromedp.Submit(chromedp.CSS(`tr[data-key] form`)),
		chromedp.WaitVisible(chromedp.CSS(".notice")))
	if r := td.call("GET", "/v1/lines", key, nil); r.Status != 401 {
		t.Errorf("GET /v1/lines with the revoked key: %d, want 401", r.Status)
	}
}
