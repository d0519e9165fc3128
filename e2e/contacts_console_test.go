package e2e

import (
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The Blocked page in a browser: the owner blocks a contact with its
// form (the API then refuses a send to it), sees a contact that texted
// STOP under Opted out with the word it wrote, and unblocks the first.
func TestBlockedAndOptedOutInTheConsole(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	td.inbound(mainLine, alice, "hi")
	td.inbound(mainLine, bob, "Stop")

	b := newBrowser(t)
	b.signIn(td)
	b.do("open the blocked page", chromedp.Navigate(td.base+"/dashboard/blocked?line="+url.QueryEscape(mainLine)),
		chromedp.WaitVisible(chromedp.CSS(`#opted-out tr[data-handle="`+bob+`"]`)))
	if got := b.text("bob's opted-out row", `#opted-out tr[data-handle="`+bob+`"]`); !strings.Contains(got, "Stop") {
		t.Errorf("the opted-out row says %q", got)
	}
	b.do("block alice",
		chromedp.SetValue(chromedp.CSS(`#block-contact input[name=handle]`), "+1 (555) 111-0001"),
		chromedp.Click(chromedp.CSS(`#block-contact button`)),
		chromedp.WaitVisible(chromedp.CSS(`#blocked tr[data-handle="`+alice+`"]`)))
	if r := td.call("POST", "/v1/messages", key, map[string]any{"from": mainLine, "to": alice, "text": "hi"}); r.Status != 403 || r.ErrCode() != "contact_blocked" {
		t.Errorf("a send to the contact blocked in the console: %d %s", r.Status, r.Raw)
	}
	b.do("unblock alice",
		chromedp.Submit(chromedp.CSS(`#blocked tr[data-handle="`+alice+`"] form`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice[role=status]`)))
	b.waitFor("alice's row gone", `!document.querySelector('#blocked tr[data-handle="`+alice+`"]')`)
	if r := td.call("GET", "/v1/contacts/blocked?from="+url.QueryEscape(mainLine), key, nil); r.Status != 200 || len(r.Data()) != 0 {
		t.Errorf("the blocked list after unblocking in the console: %d %s", r.Status, r.Raw)
	}
}
