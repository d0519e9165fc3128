package e2e

import (
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// Draft and approve on the whole daemon: an agent key made with
// --approval required has its messages wait as drafts; the owner sees
// them on the console's Approvals page (and the keys page says the key
// requires approval), changes one's text and approves
// it (it is sent in the owner's words) and declines the other (it fails
// with error declined, and is never sent).
func TestDraftsApprovedInTheConsole(t *testing.T) {
	td := startTestDaemon(t, "")
	agent := td.key("--label", "drafter", "--agent", "--approval", "required")
	chatID := td.inbound(mainLine, alice, "can I change my booking?")["chat_id"].(string)
	send := func(text string) string {
		t.Helper()
		r := td.call("POST", "/v1/messages", agent, map[string]any{"from": mainLine, "to": alice, "text": text})
		if r.Status != 201 || r.Body["approval"] != "waiting" || r.Body["status"] != "pending" {
			t.Fatalf("agent send %q: %d %s", text, r.Status, r.Raw)
		}
		return r.Body["id"].(string)
	}
	edited, declined := send("Sure, to when?"), send("No.")

	b := newBrowser(t)
	b.signIn(td)
	b.do("open the keys", chromedp.Navigate(td.base+"/dashboard/keys"), chromedp.WaitVisible(chromedp.CSS(`tr[data-key]`)))
	if got := b.text("the key's agent column", `tr[data-key] td:nth-child(6)`); !strings.Contains(got, "approval required") {
		t.Errorf("the keys page's Agent column says %q", got)
	}
	b.do("open the approvals", chromedp.Navigate(td.base+"/dashboard/approvals"), chromedp.WaitVisible(chromedp.CSS(`article[data-outbox="`+edited+`"]`)))
	if got := b.text("the other draft", `article[data-outbox="`+declined+`"]`); !strings.Contains(got, mainLine) {
		t.Errorf("the declined draft's entry says %q", got)
	}
	b.do("change the text and approve",
		chromedp.SetValue(chromedp.CSS(`article[data-outbox="`+edited+`"] textarea`), "Sure: which day suits you?"),
		chromedp.Click(chromedp.CSS(`article[data-outbox="`+edited+`"] form.approve button`)),
		chromedp.WaitVisible(chromedp.CSS(`p.notice[role=status]`)))
	if got := b.text("the notice", `p.notice[role=status]`); !strings.Contains(got, "Approved") {
		t.Errorf("after Approve the page says %q", got)
	}
	b.do("decline the other",
		chromedp.Submit(chromedp.CSS(`article[data-outbox="`+declined+`"] form.decline`)),
		chromedp.WaitVisible(chromedp.CSS(`#no-drafts`)))

	if item := td.waitOutbox(agent, edited); item["status"] != "sent" || item["approval"] != "approved" || item["approval_by"] != "console" {
		t.Fatalf("the approved draft: %v", item)
	}
	if item := td.waitOutbox(agent, declined); item["status"] != "failed" || item["error"] != "declined" {
		t.Fatalf("the declined draft: %v", item)
	}
	msgs := td.call("GET", "/v1/messages?from="+mainLine+"&to="+chatID, agent, nil).Data()
	if len(msgs) != 2 || msgs[0]["text"] != "Sure: which day suits you?" {
		t.Fatalf("the chat holds %v; want the contact's message and the owner's words", msgs)
	}
}
