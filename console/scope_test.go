package console_test

import (
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// Each page shows what its counters count: the overview's webhook figures
// are the sums of the Webhooks page's rows, for the operator (every
// owner's webhooks, with their owner) and for each owner (their own).

// hookRow is a webhook's row on the Webhooks page.
type hookRow struct {
	owner, state string
	failed       int
}

var (
	hookRowRE  = regexp.MustCompile(`(?s)<tr data-webhook="(wh_[a-z2-7]+)">(.*?)</tr>`)
	ownerRE    = regexp.MustCompile(`(?s)<td class="owner">(.*?)</td>`)
	stateRE    = regexp.MustCompile(`(?s)<td class="state">(.*?)</td>`)
	failedRE   = regexp.MustCompile(`<td class="failed[^"]*">(\d+)</td>`)
	overviewRE = regexp.MustCompile(`(?s)<div class="card" id="webhook-figures">.*?>(\d+) deliveries waiting<.*?<p>(.*?)</p></div>`)
	tagRE      = regexp.MustCompile(`<[^>]+>`)
)

func textOf(s string) string {
	return strings.Join(strings.Fields(html.UnescapeString(tagRE.ReplaceAllString(s, ""))), " ")
}

// webhookRows reads the Webhooks page at path.
func (b *browser) webhookRows(path string) map[string]hookRow {
	b.e.t.Helper()
	a := b.do("GET", path, nil)
	if a.status != http.StatusOK {
		b.e.t.Fatalf("GET %s: %d %s", path, a.status, a.body)
	}
	rows := map[string]hookRow{}
	for _, m := range hookRowRE.FindAllStringSubmatch(a.body, -1) {
		var r hookRow
		if o := ownerRE.FindStringSubmatch(m[2]); o != nil {
			r.owner = textOf(o[1])
		}
		if s := stateRE.FindStringSubmatch(m[2]); s != nil {
			r.state = textOf(s[1])
		}
		f := failedRE.FindStringSubmatch(m[2])
		if f == nil {
			b.e.t.Fatalf("%s: webhook %s's row has no failed count:\n%s", path, m[1], m[2])
		}
		r.failed, _ = strconv.Atoi(f[1])
		rows[m[1]] = r
	}
	return rows
}

// overviewFailures is what the overview's webhook card says of the last
// day's failed attempts, and where that figure links to.
func (b *browser) overviewFailures() (text, href string) {
	b.e.t.Helper()
	page := b.do("GET", "/dashboard/", nil).body
	m := overviewRE.FindStringSubmatch(page)
	if m == nil {
		b.e.t.Fatalf("the overview has no webhook figures:\n%s", page)
	}
	href = regexp.MustCompile(`href="([^"]+)"`).FindStringSubmatch(m[2])[1]
	return textOf(m[2]), href
}

func TestWebhookCountersMatchTheirLists(t *testing.T) {
	e := start(t, "[webhooks]\nallow_http = true\nallow_private_networks = true\nretry_schedule = [\"10ms\", \"10ms\", \"10ms\"]\n")
	apic := apitest.Client{TB: t, Base: e.base}
	failing := apitest.NewReceiver(t, false, func(int, http.ResponseWriter, *http.Request) int { return http.StatusInternalServerError })
	healthy := apitest.NewReceiver(t, false, nil)
	e.d.Key(api.KeyRequest{Owner: "ann"}) // ann has a key, and no webhook
	bea := e.d.Key(api.KeyRequest{Owner: "bea"})

	// Bea pairs her sandbox and hooks it to a receiver that always fails;
	// the operator hooks the main line to one that answers.
	code, _ := apic.Call("POST", "/v1/sandbox", bea, nil).Body["activation_code"].(string)
	e.d.Inbound(daemontest.SandboxLine, alice, code)
	beas := apic.Call("POST", "/v1/webhooks", bea, map[string]any{"from": daemontest.SandboxLine, "url": failing.Server.URL, "events": []string{"message.received"}})
	var hosts api.Webhook
	err := e.adminDo("POST", "/v1/webhooks", map[string]any{"from": mainLine, "url": healthy.Server.URL, "events": []string{"message.received"}}, &hosts)
	if beas.Status != 201 || err != nil {
		t.Fatalf("create the webhooks: %d %s, %v", beas.Status, beas.Raw, err)
	}
	beaHook := beas.Body["id"].(string)
	e.d.Inbound(daemontest.SandboxLine, alice, "to bea's sandbox")
	e.d.Inbound(mainLine, alice, "to the main line")
	// The first attempt and three retries fail.
	testkit.Eventually(t, 10*time.Second, func() bool {
		var attempts api.List[storage.Attempt]
		if err := e.adminDo("GET", "/webhooks/attempts?webhook="+beaHook, nil, &attempts); err != nil {
			t.Fatal(err)
		}
		return len(attempts.Data) == 4 && len(healthy.Requests()) == 1
	})

	operator := e.browser()
	operator.signIn("")
	rows := operator.webhookRows("/dashboard/webhooks")
	if got, want := rows[beaHook], "bea"; got.owner != want || got.failed != 4 || !strings.HasPrefix(got.state, "✗ failing since ") {
		t.Errorf("the operator's row of bea's webhook: %+v, want owner bea, failing since …, 4 failed", got)
	}
	if got := rows[hosts.ID]; got.owner != "the host" || got.failed != 0 || got.state != "✓ healthy" {
		t.Errorf("the operator's row of their own webhook: %+v, want the host's, healthy, 0 failed", got)
	}
	if text, href := operator.overviewFailures(); text != "4 failed attempts in the last day" || href != "/dashboard/webhooks" {
		t.Errorf("the operator's overview: %q linking to %s, want the 4 failed attempts its Webhooks page lists", text, href)
	}
	if got := operator.webhookRows("/dashboard/webhooks?owner=bea"); len(got) != 1 || got[beaHook].failed != 4 {
		t.Errorf("the operator's Webhooks page for owner bea: %+v, want bea's webhook only", got)
	}

	for _, c := range []struct {
		owner  string
		hooks  []string
		failed string
	}{
		{"bea", []string{beaHook, hosts.ID}, "4 failed attempts in the last day"},
		{"ann", []string{hosts.ID}, "No failed attempts in the last day"},
	} {
		b := e.browser()
		b.signIn(c.owner)
		rows := b.webhookRows("/dashboard/webhooks")
		sum := 0
		for id, r := range rows {
			sum += r.failed
			if r.owner != "" {
				t.Errorf("%s's Webhooks page has an owner column: %s %+v", c.owner, id, r)
			}
		}
		if len(rows) != len(c.hooks) || rows[c.hooks[0]].state == "" {
			t.Errorf("%s's Webhooks page lists %v, want %v", c.owner, rows, c.hooks)
		}
		if text, _ := b.overviewFailures(); text != c.failed || (sum == 0) != strings.HasPrefix(text, "No") {
			t.Errorf("%s's overview says %q, their Webhooks page counts %d failed; want %q", c.owner, text, sum, c.failed)
		}
	}

	// The operator deletes bea's sandbox webhook, which the API keeps to
	// her, acting as her.
	if a := operator.do("POST", "/dashboard/webhooks/"+beaHook+"/delete", url.Values{"csrf": {operator.csrf()}}); a.status != http.StatusSeeOther {
		t.Fatalf("the operator deletes bea's webhook: %d %s", a.status, a.body)
	}
	if _, ok := operator.webhookRows("/dashboard/webhooks")[beaHook]; ok {
		t.Error("bea's webhook is still listed after the operator deleted it")
	}
}

// The operator who opens the sandbox line's conversations is told what
// they can do, not to create a key.
func TestOperatorOnTheSandboxLine(t *testing.T) {
	e := start(t, "")
	b := e.browser()
	b.signIn("")
	a := b.do("GET", "/dashboard/chats?line="+url.QueryEscape(daemontest.SandboxLine), nil)
	if a.status != http.StatusOK || !strings.Contains(a.body, `<a href="/dashboard/sandbox">See the owners' sandboxes</a>`) ||
		!strings.Contains(a.body, "<code>blueline dashboard --owner NAME</code>") || strings.Contains(a.body, "keys create") {
		t.Errorf("the operator on the sandbox's conversations: %d\n%s", a.status, a.body)
	}
}

// The outbox says who each item goes to, linking the conversation, and
// what it says.
func TestOutboxShowsRecipientAndText(t *testing.T) {
	e := start(t, "")
	m := e.d.Inbound(mainLine, alice, "hi")
	long := strings.Repeat("long reply ", 20)
	var item api.OutboxItem
	if err := e.adminDo("POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": long}, &item); err != nil {
		t.Fatal(err)
	}
	b := e.browser()
	b.signIn("")
	page := b.do("GET", "/dashboard/outbox", nil).body
	row := regexp.MustCompile(`(?s)<tr data-outbox="` + item.ID + `">.*?</tr>`).FindString(page)
	preview := regexp.MustCompile(`(?s)<td class="small preview" dir="auto">(.*?)</td>`).FindStringSubmatch(row)
	if !strings.Contains(row, `<td class="to"><a href="/dashboard/chats/`+m.ChatID+`"><bdi>&#43;`+alice[1:]+`</bdi></a></td>`) ||
		preview == nil || !strings.HasPrefix(long, strings.TrimSuffix(preview[1], "…")) || len([]rune(preview[1])) != 80 {
		t.Errorf("the outbox's row of %s: want alice linked to %s and the text's first 80 characters\n%s", item.ID, m.ChatID, row)
	}
	// The overview's "in the last day" lists those accepted since a time.
	later := strconv.FormatInt(item.CreatedAt+1, 10)
	if page := b.do("GET", "/dashboard/outbox?since="+later, nil).body; strings.Contains(page, item.ID) {
		t.Errorf("the outbox since %s lists %s, accepted before", later, item.ID)
	}
	if a := b.do("GET", "/dashboard/outbox?since=yesterday", nil); a.status != http.StatusBadRequest || !strings.Contains(a.body, "since is a time in Unix milliseconds, not &#34;yesterday&#34;.") {
		t.Errorf("the outbox since yesterday: %d\n%s", a.status, a.body)
	}
}
