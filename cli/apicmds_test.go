package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
)

// lines list shows every configured line, tab-separated or in the API's
// envelope with --json.
func TestLinesList(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")

	out := mustCLI(t, d, "lines", "list")
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 4 {
		t.Fatalf("lines list: %d rows, want 4:\n%s", len(rows), out)
	}
	seen := map[string][]string{}
	for _, r := range rows {
		f := strings.Split(r, "\t")
		if len(f) != 5 || !strings.HasPrefix(f[0], "ln_") {
			t.Fatalf("lines list row %q: want ID, handle, label, service, active", r)
		}
		seen[f[1]] = f
	}
	if f := seen[daemontest.MainLine]; f == nil || f[2] != "Main line" || f[4] != "true" {
		t.Errorf("lines list, main line: %q", f)
	}
	if f := seen[daemontest.SMSLine]; f == nil || f[3] != "sms" {
		t.Errorf("lines list, SMS line: %q", f)
	}
	if f := seen[daemontest.PlainLine]; f == nil || f[2] != "-" {
		t.Errorf("lines list, plain line: %q; want label -", f)
	}

	var page struct {
		Data    []struct{ ID, Handle string }
		HasMore bool `json:"has_more"`
	}
	decodeJSON(t, "lines ls --json", mustCLI(t, d, "lines", "ls", "--json"), &page)
	if len(page.Data) != 4 || page.HasMore {
		t.Errorf("lines ls --json: %+v", page)
	}
}

// chats list shows a line's chats, pages with --limit and --cursor (the
// next cursor on stderr), and an empty list as data: [] in JSON.
func TestChatsList(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	d.Inbound(daemontest.MainLine, daemontest.Alice, "hi")
	d.Inbound(daemontest.MainLine, daemontest.Bob, "hello")

	out := mustCLI(t, d, "chats", "list", "--line", daemontest.MainLine)
	rows := strings.Split(strings.TrimSpace(out), "\n")
	if len(rows) != 2 {
		t.Fatalf("chats list: want 2 rows:\n%s", out)
	}
	for i, who := range []string{daemontest.Bob, daemontest.Alice} {
		f := strings.Split(rows[i], "\t")
		if len(f) != 5 || !strings.HasPrefix(f[0], "cht_") || f[1] != who || f[3] != "false" || f[4] == "-" {
			t.Errorf("chats list row %d: %q; want %s's chat, most recent first", i, f, who)
		}
	}

	out, errOut, code := cliOn(d, "chats", "list", "--line", daemontest.MainLine, "--limit", "1")
	if code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(errOut, "more: pass --cursor ") {
		t.Fatalf("chats list --limit 1: exit %d, stdout %q, stderr %q; want one row and the next cursor", code, out, errOut)
	}
	cursor := strings.Fields(strings.TrimPrefix(errOut, "more: pass --cursor "))[0]
	out, errOut, code = cliOn(d, "chats", "list", "--line", daemontest.MainLine, "--limit", "1", "--cursor", cursor)
	if code != 0 || !strings.Contains(out, "\t"+daemontest.Alice+"\t") || errOut != "" {
		t.Errorf("chats list, second page: exit %d, stdout %q, stderr %q; want Alice's chat and no more", code, out, errOut)
	}

	var page struct {
		Data []struct{ Identifier string }
	}
	decodeJSON(t, "chats list --json", mustCLI(t, d, "chats", "list", "--line", daemontest.PlainLine, "--json"), &page)
	if page.Data == nil || len(page.Data) != 0 {
		t.Errorf("chats list --json of a line without chats: %+v; want data []", page)
	}
	if out := mustCLI(t, d, "chats", "list", "--line", daemontest.PlainLine, "--json"); !strings.Contains(out, `"data": []`) {
		t.Errorf("chats list --json without chats: %s", out)
	}
}

// send queues a message and prints the outbox item, which outbox get
// shows; send without --from and several lines names them.
func TestSendAndOutboxGet(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	d.Inbound(daemontest.MainLine, daemontest.Alice, "hi")
	d.Inbound(daemontest.MainLine, daemontest.Bob, "hi")

	var item struct{ ID, Status string }
	decodeJSON(t, "send --json", mustCLI(t, d, "send", daemontest.Alice, "hello", "--from", daemontest.MainLine, "--json"), &item)
	if !strings.HasPrefix(item.ID, "obx_") {
		t.Fatalf("send --json: %+v; want an outbox item", item)
	}
	out := mustCLI(t, d, "send", daemontest.Bob, "hey", "--from", daemontest.MainLine)
	if !strings.HasPrefix(out, "Queued to "+daemontest.Bob+" via "+daemontest.MainLine+"\n    id ") {
		t.Errorf("send: %q", out)
	}

	out = mustCLI(t, d, "outbox", "get", item.ID)
	if !strings.HasPrefix(out, "id ") || !strings.Contains(out, item.ID) || !strings.Contains(out, "status") {
		t.Errorf("outbox get: %q", out)
	}
	var got struct{ ID, Status string }
	decodeJSON(t, "outbox get --json", mustCLI(t, d, "outbox", "get", item.ID, "--json"), &got)
	if got.ID != item.ID || got.Status == "" {
		t.Errorf("outbox get --json: %+v", got)
	}
	if out, errOut, code := cliOn(d, "outbox", "get", "obx_none"); code != 1 || out != "" || errOut == "" {
		t.Errorf("outbox get of an unknown item: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}

	out, errOut, code := cliOn(d, "send", daemontest.Alice, "hi")
	if code != 2 || out != "" || !strings.Contains(errOut, "several lines (") || !strings.Contains(errOut, daemontest.MainLine) {
		t.Errorf("send without --from: exit %d, stdout %q, stderr %q; want 2 and the lines named", code, out, errOut)
	}

	// A number without its country code is refused at once, with the
	// forms a handle takes.
	out, errOut, code = cliOn(d, "send", "555-1234", "hi", "--from", daemontest.MainLine)
	if code != 1 || out != "" || !strings.Contains(errOut, `to "555-1234" is not a handle`) ||
		!strings.Contains(errOut, "a phone number needs a + and its country code") || !strings.Contains(errOut, "E.164") ||
		!strings.Contains(errOut, "(invalid_parameter_value)") {
		t.Errorf("send to 555-1234: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// files upload prints the file's record; files get prints a download URL
// that serves the content, and --download writes the content, locally
// and over the network.
func TestFilesUploadAndGet(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	path := filepath.Join(t.TempDir(), "note.txt")
	content := "a note\n"
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}

	var file struct {
		ID, Filename string
		MimeType     string `json:"mime_type"`
		Size         int
	}
	decodeJSON(t, "files upload --json", mustCLI(t, d, "files", "upload", path, "--json"), &file)
	if !strings.HasPrefix(file.ID, "file_") || file.Filename != "note.txt" || !strings.HasPrefix(file.MimeType, "text/plain") || file.Size != len(content) {
		t.Errorf("files upload --json: %+v", file)
	}
	out := mustCLI(t, d, "files", "upload", path, "--filename", "card.vcf", "--mime", "text/vcard")
	if !strings.HasPrefix(out, "Uploaded card.vcf\n") || !strings.Contains(out, "text/vcard") {
		t.Errorf("files upload --filename --mime: %q", out)
	}
	if out, errOut, code := cliOn(d, "files", "upload", filepath.Dir(path)); code != 1 || out != "" || !strings.Contains(errOut, "is a folder, not a file") {
		t.Errorf("files upload of a folder: exit %d, stdout %q, stderr %q", code, out, errOut)
	}

	link := strings.TrimSpace(mustCLI(t, d, "files", "get", file.ID))
	if !strings.HasPrefix(link, d.URL()+"/") || !strings.Contains(link, file.ID) {
		t.Errorf("files get: %q; want a URL of the daemon", link)
	}
	var fl struct{ ID, URL string }
	decodeJSON(t, "files get --json", mustCLI(t, d, "files", "get", file.ID, "--json"), &fl)
	if fl.ID != file.ID || !strings.HasPrefix(fl.URL, d.URL()+"/") {
		t.Errorf("files get --json: %+v", fl)
	}
	if got := mustCLI(t, d, "files", "get", file.ID, "--download"); got != content {
		t.Errorf("files get --download (local): %q, want %q", got, content)
	}
	if out, errOut, code := cliOn(d, "files", "get", "file_none"); code != 1 || out != "" || errOut == "" {
		t.Errorf("files get of an unknown file: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}

	t.Setenv(envAPIKey, d.Key(api.KeyRequest{}))
	if got := mustCLI(t, d, "files", "get", file.ID, "--download", "--base-url", d.URL()); got != content {
		t.Errorf("files get --download (remote): %q, want %q", got, content)
	}
}

// sandbox status and activate, on the host with --owner and over the
// network as the key's owner: missing, then pending with a code.
func TestSandboxStatusAndActivate(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	owner := "dev@example.com"

	out := mustCLI(t, d, "sandbox", "status", "--owner", owner)
	if !strings.HasPrefix(out, "No sandbox yet") || !strings.Contains(out, daemontest.SandboxLine) {
		t.Errorf("sandbox status of a new owner: %q", out)
	}
	out = mustCLI(t, d, "sandbox", "activate", "--owner", owner, "--no-wait")
	if !strings.HasPrefix(out, "Activate your sandbox: text ") || !strings.Contains(out, " to "+daemontest.SandboxLine+" from your phone.\n") {
		t.Errorf("sandbox activate --no-wait: %q", out)
	}
	var s struct {
		Status string
		Code   *string `json:"activation_code"`
		Usage  struct{ Used, Limit int }
	}
	decodeJSON(t, "sandbox status --json", mustCLI(t, d, "sandbox", "status", "--owner", owner, "--json"), &s)
	if s.Status != "pending" || s.Code == nil || *s.Code == "" || s.Usage.Limit != 5 {
		t.Fatalf("sandbox status --json after activate: %+v", s)
	}
	out = mustCLI(t, d, "sandbox", "status", "--owner", owner)
	if !strings.HasPrefix(out, "Sandbox pending activation\n") || !strings.Contains(out, *s.Code) || !strings.Contains(out, "usage today   0/5") {
		t.Errorf("sandbox status, pending: %q", out)
	}

	t.Setenv(envAPIKey, d.Key(api.KeyRequest{Owner: owner}))
	var remote struct {
		Status string
		Code   *string `json:"activation_code"`
	}
	decodeJSON(t, "sandbox activate --json (remote)", mustCLI(t, d, "sandbox", "activate", "--no-wait", "--json", "--base-url", d.URL()), &remote)
	if remote.Status != "pending" || remote.Code == nil || *remote.Code != *s.Code {
		t.Errorf("sandbox activate over the network: %+v; want the owner's pending sandbox, code %s", remote, *s.Code)
	}

	var all struct {
		Handle string
		Owners []struct{ Owner, Status string }
	}
	decodeJSON(t, "sandbox", mustCLI(t, d, "sandbox"), &all)
	if all.Handle != daemontest.SandboxLine || len(all.Owners) == 0 {
		t.Errorf("sandbox: %+v", all)
	}
}

// webhooks list on the host lists every webhook with its line and state;
// delete removes one.
func TestWebhooksListAndDelete(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d, hookURL := hostileDaemon(t)

	var hook struct{ ID string }
	decodeJSON(t, "webhooks create", mustCLI(t, d, "webhooks", "create", "--url", hookURL, "--event", "message.received,reaction.added", "--line", daemontest.MainLine, "--json"), &hook)

	out := mustCLI(t, d, "webhooks", "list")
	want := strings.Join([]string{hook.ID, daemontest.MainLine, "active", "message.received,reaction.added", hookURL}, "\t") + "\n"
	if out != want {
		t.Errorf("webhooks list:\n%q\nwant\n%q", out, want)
	}
	var hooks []struct{ ID string }
	decodeJSON(t, "webhooks list --json", mustCLI(t, d, "webhooks", "list", "--json"), &hooks)
	if len(hooks) != 1 || hooks[0].ID != hook.ID {
		t.Errorf("webhooks list --json: %+v", hooks)
	}
	out = mustCLI(t, d, "webhooks", "list", "--line", daemontest.MainLine)
	if !strings.HasPrefix(out, hook.ID+"\t"+hookURL+"\t") {
		t.Errorf("webhooks list --line: %q", out)
	}

	if out := mustCLI(t, d, "webhooks", "delete", hook.ID); out != "Deleted webhook "+hook.ID+"\n" {
		t.Errorf("webhooks delete: %q", out)
	}
	if out := mustCLI(t, d, "webhooks", "list"); out != "" {
		t.Errorf("webhooks list after delete: %q", out)
	}
	if out, errOut, code := cliOn(d, "webhooks", "delete", hook.ID, "--json"); code != 1 || out != "" || errOut == "" {
		t.Errorf("webhooks delete twice: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}
}

// The owner writing from their phone (sim owner-send) holds agent keys back;
// the host's operator gives the chat back (chats resume), and leases and
// releases it (chats lease, chats release).
func TestChatsTakeoverAndLease(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	chatID := d.Inbound(daemontest.MainLine, daemontest.Alice, "hi").ChatID
	var m api.Message
	decodeJSON(t, "sim owner-send", mustCLI(t, d, "sim", "owner-send", "--line", daemontest.MainLine, "--to", chatID, "--text", "mine"), &m)
	if !m.IsFromMe || m.ChatID != chatID || m.OutboxID != nil {
		t.Fatalf("sim owner-send: %+v", m)
	}
	var res api.ChatResume
	decodeJSON(t, "chats resume", mustCLI(t, d, "chats", "resume", "--line", daemontest.MainLine, "--to", daemontest.Alice, "--json"), &res)
	if !res.WasHumanActive || res.ChatID != chatID {
		t.Fatalf("chats resume: %+v", res)
	}
	out := mustCLI(t, d, "chats", "lease", "--line", daemontest.MainLine, "--to", chatID, "--ttl", "60", "--label", "cli")
	if !strings.Contains(out, "admin socket") || !strings.Contains(out, "active") {
		t.Errorf("chats lease printed:\n%s", out)
	}
	var l api.ChatLease
	decodeJSON(t, "chats release", mustCLI(t, d, "chats", "release", "--line", daemontest.MainLine, "--to", chatID, "--json"), &l)
	if l.Status != "released" || l.Label == nil || *l.Label != "cli" {
		t.Fatalf("chats release: %+v", l)
	}
	if _, errOut, code := cliOn(d, "chats", "release", "--line", daemontest.MainLine, "--to", chatID); code == 0 || !strings.Contains(errOut, "lease_not_found") {
		t.Errorf("chats release again: exit %d, %s", code, errOut)
	}
}
