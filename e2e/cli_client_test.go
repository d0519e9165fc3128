package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/cli"
	"github.com/blueline-app/blueline/testkit"
)

// clientCLI runs the client commands against a daemon, locally (through
// the admin socket, no key) or remotely (--base-url and the key in
// $BLUELINE_API_KEY, which the test sets).
type clientCLI struct {
	t      *testing.T
	td     *testDaemon
	remote bool
}

// run runs a command with stdin as its (piped) standard input.
func (c clientCLI) run(stdin string, args ...string) (stdout, stderr string, code int) {
	c.t.Helper()
	if c.remote {
		args = append(args, "--base-url", c.td.base)
	}
	var out, errOut bytes.Buffer
	code = cli.Run(context.Background(), cli.Build{}, append(args, "--config", c.td.cfgPath), strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// must runs a command that must succeed, and returns its stdout.
func (c clientCLI) must(args ...string) string {
	c.t.Helper()
	out, errOut, code := c.run("", args...)
	if code != 0 {
		c.t.Fatalf("blueline %s: exit %d: %s", strings.Join(args, " "), code, errOut)
	}
	return out
}

// json runs a command with --json that must succeed, and decodes its
// output.
func (c clientCLI) json(args ...string) map[string]any {
	c.t.Helper()
	return decode(c.t, c.must(append(args, "--json")...))
}

func decode(t *testing.T, out string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(out), &m); err != nil {
		t.Fatalf("not a JSON object: %v\n%s", err, out)
	}
	return m
}

// fails runs a command that must fail with code, its stderr saying want.
func (c clientCLI) fails(code int, want string, args ...string) {
	c.t.Helper()
	out, errOut, got := c.run("", args...)
	if got != code || out != "" || !strings.Contains(errOut, want) {
		c.t.Errorf("blueline %s: exit %d, stdout %q, stderr %q; want exit %d and %q", strings.Join(args, " "), got, out, errOut, code, want)
	}
}

// data is the items of a list envelope, which must say has_more false
// unless more.
func data(t *testing.T, page map[string]any) []map[string]any {
	t.Helper()
	items, ok := page["data"].([]any)
	if !ok {
		t.Fatalf("no data in %v", page)
	}
	var out []map[string]any
	for _, it := range items {
		out = append(out, it.(map[string]any))
	}
	return out
}

// waitSent waits for an outbox item to be sent, through the CLI; args
// are extra flags (--owner).
func (c clientCLI) waitSent(id string, args ...string) map[string]any {
	c.t.Helper()
	var item map[string]any
	testkit.Eventually(c.t, 10*time.Second, func() bool {
		item = c.json(append([]string{"outbox", "get", id}, args...)...)
		return item["status"] == "sent" || item["status"] == "failed"
	})
	if item["status"] != "sent" {
		c.t.Fatalf("outbox %s: %v", id, item)
	}
	return item
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every client command, on the host through the admin socket and over the
// network with a key.
func TestClientCommands(t *testing.T) {
	rc := newReceiver(t, nil)
	td := startTestDaemon(t, webhookConfig(t, rc, ""))
	key := td.key()
	for _, mode := range []struct {
		name    string
		remote  bool
		contact string
	}{{"local", false, alice}, {"remote", true, bob}} {
		t.Run(mode.name, func(t *testing.T) {
			if mode.remote {
				t.Setenv("BLUELINE_API_KEY", key)
			}
			c := clientCLI{t: t, td: td, remote: mode.remote}
			who := mode.contact
			var msg map[string]any
			{
				out, errOut, code := c.run("", "sim", "inbound", "--line", mainLine, "--from", who, "--text", "hi from "+who)
				if mode.remote { // sim is a host command: it has no --base-url
					if code != 2 || !strings.Contains(errOut, "unknown flag: --base-url") {
						t.Fatalf("sim with --base-url: exit %d, %s", code, errOut)
					}
					msg = td.inbound(mainLine, who, "hi from "+who)
				} else {
					msg = decode(t, out)
				}
			}
			msgID := msg["id"].(string)

			// lines list: the API's envelope with --json, a table (tab
			// separated when piped) without.
			lines := c.json("lines", "list")
			if lines["has_more"] != false || len(data(t, lines)) != 4 {
				t.Errorf("lines list --json: %v", lines)
			}
			if out := c.must("lines", "ls"); !regexp.MustCompile(`(?m)^ln_\S+\t\` + mainLine + `\tMain line\timessage\ttrue$`).MatchString(out) {
				t.Errorf("lines ls:\n%s", out)
			}

			// send: text as an argument, from stdin, with an attachment, a
			// reply, a voice memo.
			sent := c.json("send", who, "hello", "--from", mainLine)
			if !strings.HasPrefix(sent["id"].(string), "obx_") || sent["status"] != "pending" {
				t.Errorf("send --json: %v", sent)
			}
			c.waitSent(sent["id"].(string))
			out, errOut, code := c.run("from stdin\n", "send", who, "--from", mainLine, "--json")
			if code != 0 || decode(t, out)["payload"].(map[string]any)["text"] != "from stdin" {
				t.Errorf("send with stdin: exit %d, %s %s", code, out, errOut)
			}
			human := c.must("send", who, "plain", "--from", mainLine)
			if !strings.HasPrefix(human, "Queued to "+who+" via "+mainLine+"\n") || !regexp.MustCompile(`(?m)^    id +obx_`).MatchString(human) {
				t.Errorf("send:\n%s", human)
			}
			card := writeTemp(t, "card.vcf", "BEGIN:VCARD\nVERSION:3.0\nFN:Ann\nEND:VCARD\n")
			out, errOut, code = c.run("", "send", who, "--attach", card, "--from", mainLine, "--json")
			if code != 0 || !strings.Contains(errOut, "uploaded card.vcf as file_") {
				t.Fatalf("send --attach: exit %d, %s", code, errOut)
			}
			attached := c.waitSent(decode(t, out)["id"].(string))
			fileID := attached["payload"].(map[string]any)["attachments"].([]any)[0].(string)
			withID := c.json("send", who, "again", "--attach", fileID, "--from", mainLine)
			if withID["payload"].(map[string]any)["attachments"].([]any)[0] != fileID {
				t.Errorf("send --attach file_…: %v", withID)
			}
			reply := c.json("send", who, "re", "--reply-to", msgID, "--from", mainLine)
			if reply["payload"].(map[string]any)["reply_to"] != msgID {
				t.Errorf("send --reply-to: %v", reply)
			}
			memo := writeTemp(t, "memo.m4a", "not really audio")
			audio := c.json("send", who, "--audio", memo, "--from", mainLine)
			if audio["payload"].(map[string]any)["audio_message"] == nil {
				t.Errorf("send --audio: %v", audio)
			}

			// react, typing, read.
			rx := c.json("react", msgID, "love", "--to", who, "--from", mainLine)
			if rx["payload"].(map[string]any)["type"] != "love" {
				t.Errorf("react: %v", rx)
			}
			c.waitSent(rx["id"].(string))
			if human := c.must("react", msgID, "love", "--to", who, "--from", mainLine, "--remove"); !strings.HasPrefix(human, "Removed love on "+msgID) {
				t.Errorf("react --remove: %s", human)
			}
			on := c.json("typing", who, "--from", mainLine)
			off := c.json("typing", who, "--from", mainLine, "--off")
			if on["payload"].(map[string]any)["state"] == "off" || off["payload"].(map[string]any)["state"] != "off" {
				t.Errorf("typing: %v, --off: %v", on, off)
			}
			if typing := c.json("typing", "list", "--line", mainLine, "--chat", who); typing["has_more"] != false {
				t.Errorf("typing list: %v", typing)
			}
			if r := c.json("read", who, "--from", mainLine); !strings.HasPrefix(r["id"].(string), "obx_") {
				t.Errorf("read: %v", r)
			}

			// chats list, messages list (paged), messages get.
			chats := data(t, c.json("chats", "list", "--line", mainLine))
			found := false
			for _, ch := range chats {
				found = found || ch["identifier"] == who
			}
			if !found {
				t.Errorf("chats list: no chat with %s in %v", who, chats)
			}
			page := c.json("messages", "list", "--line", mainLine, "--chat", who, "--limit", "1")
			cursor, _ := page["next_cursor"].(string)
			if len(data(t, page)) != 1 || page["has_more"] != true || cursor == "" {
				t.Fatalf("messages list --limit 1: %v", page)
			}
			next := c.json("messages", "list", "--line", mainLine, "--chat", who, "--limit", "1", "--cursor", cursor)
			if data(t, next)[0]["id"] == data(t, page)[0]["id"] {
				t.Errorf("the next page repeats the first: %v", next)
			}
			out, errOut, code = c.run("", "messages", "list", "--line", mainLine, "--chat", who, "--limit", "1")
			if code != 0 || !strings.Contains(errOut, "more: pass --cursor "+cursor) || strings.Count(out, "\n") != 1 {
				t.Errorf("messages list: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			got := c.json("messages", "get", msgID, "--line", mainLine, "--chat", who)
			if got["id"] != msgID || got["text"] != "hi from "+who {
				t.Errorf("messages get: %v", got)
			}
			if byGUID := c.json("messages", "get", msg["guid"].(string), "--line", mainLine, "--chat", who); byGUID["id"] != msgID {
				t.Errorf("messages get GUID: %v", byGUID)
			}
			c.fails(1, "message_not_found", "messages", "get", "msg_nosuch", "--line", mainLine, "--chat", who)

			// files upload, get, get --download.
			note := writeTemp(t, "note.txt", "the content")
			file := c.json("files", "upload", note)
			if !strings.HasPrefix(file["id"].(string), "file_") || file["filename"] != "note.txt" || !strings.HasPrefix(file["mime_type"].(string), "text/plain") || file["size"] != float64(11) {
				t.Errorf("files upload: %v", file)
			}
			out, errOut, code = c.run("piped bytes", "files", "upload", "-", "--filename", "p.bin", "--mime", "application/x-test", "--json")
			if up := decode(t, out); code != 0 || up["filename"] != "p.bin" || up["mime_type"] != "application/x-test" || up["size"] != float64(11) {
				t.Errorf("files upload -: exit %d, %v, %s", code, up, errOut)
			}
			link := strings.TrimSpace(c.must("files", "get", file["id"].(string)))
			if !strings.HasPrefix(link, "http") || !strings.Contains(link, file["id"].(string)) {
				t.Errorf("files get: %q", link)
			}
			if j := c.json("files", "get", file["id"].(string)); j["id"] != file["id"] || j["url"] == "" {
				t.Errorf("files get --json: %v", j)
			}
			if content := c.must("files", "get", file["id"].(string), "--download"); content != "the content" {
				t.Errorf("files get --download: %q", content)
			}
			c.fails(1, "(file_not_found)", "files", "get", "file_nosuch")

			// outbox get.
			item := c.json("outbox", "get", sent["id"].(string))
			if item["id"] != sent["id"] || item["status"] != "sent" {
				t.Errorf("outbox get: %v", item)
			}
			if human := c.must("outbox", "get", sent["id"].(string)); !regexp.MustCompile(`(?m)^status +sent$`).MatchString(human) {
				t.Errorf("outbox get:\n%s", human)
			}
			c.fails(1, "(outbox_item_not_found)", "outbox", "get", "obx_nosuch")

			// webhooks create, list, delete.
			hook := c.json("webhooks", "create", "--url", rc.Server.URL+"/hook", "--event", "message.received", "--event", "reaction.added", "--line", mainLine)
			hookID := hook["id"].(string)
			if !strings.HasPrefix(hookID, "wh_") || !strings.HasPrefix(hook["secret"].(string), "whsec_") || len(hook["events"].([]any)) != 2 {
				t.Errorf("webhooks create: %v", hook)
			}
			listed := data(t, c.json("webhooks", "list", "--line", mainLine))
			if len(listed) != 1 || listed[0]["id"] != hookID {
				t.Errorf("webhooks list --line: %v", listed)
			}
			if mode.remote {
				c.fails(2, "webhooks list needs --line over the network", "webhooks", "list")
			} else if out := c.must("webhooks", "list"); !strings.Contains(out, hookID+"\t"+mainLine+"\tactive\tmessage.received,reaction.added\t") {
				t.Errorf("webhooks list on the host (the admin table):\n%s", out)
			}
			if del := c.json("webhooks", "delete", hookID); del["id"] != hookID || del["deleted"] != true {
				t.Errorf("webhooks delete: %v", del)
			}
			c.fails(1, "(webhook_not_found)", "webhooks", "delete", hookID)

			// Errors: the API's message and code, exit 1; usage, exit 2.
			c.fails(1, "(line_not_found)", "send", who, "hi", "--from", "+19999999999")
			c.fails(1, "(contact_has_not_messaged)", "send", carol, "hi", "--from", mainLine)
			c.fails(2, "several lines (", "send", who, "hi")
			c.fails(2, "send needs a TEXT", "send", who, "--from", mainLine)
		})
	}
}

// A key the API refuses, over the network: its message, exit 1.
func TestClientCommandsRefusedKey(t *testing.T) {
	td := startTestDaemon(t, "")
	c := clientCLI{t: t, td: td, remote: true}
	t.Setenv("BLUELINE_API_KEY", "sk_live_"+strings.Repeat("x", 40))
	c.fails(1, "(invalid_api_key)", "lines", "list")
	t.Setenv("BLUELINE_API_KEY", td.key("--scopes", "messages:read"))
	c.fails(1, "(insufficient_scope)", "lines", "list")
	t.Setenv("BLUELINE_API_KEY", "")
	c.fails(2, "--base-url needs an API key in $BLUELINE_API_KEY", "lines", "list")
	// A line-restricted key's only line is the default --from.
	t.Setenv("BLUELINE_API_KEY", td.key("--lines", mainLine))
	td.inbound(mainLine, alice, "hi")
	if sent := c.json("send", alice, "hello"); sent["payload"].(map[string]any)["from"] != mainLine {
		t.Errorf("send without --from: %v", sent)
	}
}

// sandbox status and activate: on the host as an owner (--owner), over the
// network as the key's owner; sends on the sandbox line as that owner.
func TestClientSandbox(t *testing.T) {
	td := startTestDaemon(t, "")
	const dave = "+15551110004"
	for _, mode := range []struct {
		name, owner, phone string
		remote             bool
	}{{"local", "ann@example.com", carol, false}, {"remote", "ben@example.com", dave, true}} {
		t.Run(mode.name, func(t *testing.T) {
			c := clientCLI{t: t, td: td, remote: mode.remote}
			as := []string{"--owner", mode.owner}
			if mode.remote {
				t.Setenv("BLUELINE_API_KEY", td.key("--owner", mode.owner))
				as = nil
			}
			if s := c.json(append([]string{"sandbox", "status"}, as...)...); s["status"] != "missing" || s["sandbox_line_handle"] != sandboxLine {
				t.Errorf("sandbox status: %v", s)
			}
			started := c.json(append([]string{"sandbox", "activate", "--no-wait"}, as...)...)
			code, _ := started["activation_code"].(string)
			if started["status"] != "pending" || code == "" {
				t.Fatalf("sandbox activate --no-wait: %v", started)
			}
			if human := c.must(append([]string{"sandbox", "status"}, as...)...); !strings.Contains(human, "Sandbox pending activation") || !strings.Contains(human, code) {
				t.Errorf("sandbox status:\n%s", human)
			}

			// activate waits for the code to be texted.
			args := append([]string{"sandbox", "activate"}, as...)
			if mode.remote {
				args = append(args, "--base-url", td.base)
			}
			bg := td.startCLI(t, args...)
			testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(bg.stdout.String(), "Waiting for the code") })
			if !strings.Contains(bg.stdout.String(), "text "+code+" to "+sandboxLine) {
				t.Errorf("sandbox activate: %s", bg.stdout.String())
			}
			td.inbound(sandboxLine, mode.phone, code)
			testkit.Eventually(t, 10*time.Second, func() bool { return strings.Contains(bg.stdout.String(), "Sandbox active") })
			if code := bg.stop(); code != 0 || !regexp.MustCompile(`paired with +\`+mode.phone).MatchString(bg.stdout.String()) {
				t.Errorf("sandbox activate: exit %d, %s %s", code, bg.stdout.String(), bg.stderr.String())
			}

			// Sends on the sandbox line, as the owner.
			sent := c.json(append([]string{"send", mode.phone, "from the sandbox", "--from", sandboxLine}, as...)...)
			c.waitSent(sent["id"].(string), as...)
		})
	}
	// On the host, the sandbox line's chats are an owner's: the operator
	// alone may not send there.
	c := clientCLI{t: t, td: td}
	c.fails(1, "(sandbox_requires_owner)\nOn the host, act as a key owner with --owner NAME.", "send", carol, "hi", "--from", sandboxLine)
	// The host's own sandbox command is unchanged.
	var all map[string]any
	if err := json.Unmarshal([]byte(td.mustCLI("sandbox")), &all); err != nil || all["handle"] != sandboxLine || all["owners"] == nil {
		t.Errorf("sandbox: %v %v", all, err)
	}
}
