package cli

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/daemontest"
)

// runCLIIn is runCLI with stdin as the standard input.
func runCLIIn(t *testing.T, stdin io.Reader, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := env{getenv: os.Getenv, installedConfig: func() string { return "" }}
	code = run(context.Background(), Build{}, args, stdin, &out, &errOut, e)
	return out.String(), errOut.String(), code
}

// The command lines a client command refuses before asking the daemon
// anything.
func TestClientCommandUsageErrors(t *testing.T) {
	t.Setenv("BLUELINE_CONFIG", "")
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	for _, c := range []struct {
		args      []string
		msg, used string
	}{
		{[]string{"send"}, "send takes TO and at most a TEXT", "blueline send"},
		{[]string{"send", "+1", "a", "b"}, "send takes TO and at most a TEXT", "blueline send"},
		{[]string{"send", "+1"}, "send needs a TEXT (an argument, or stdin), --attach or --audio", "blueline send"},
		{[]string{"send", "+1", "hi", "--audio", "memo.m4a"}, "--audio sends a voice memo alone", "blueline send"},
		{[]string{"send", "+1", "hi", "--base-url", "ftp://x"}, `--base-url "ftp://x" is not an http:// or https:// URL`, "blueline send"},
		{[]string{"send", "+1", "hi", "--base-url", "https://x"}, "--base-url needs an API key in $BLUELINE_API_KEY", "blueline send"},
		{[]string{"react", "msg_1"}, "react takes MESSAGE_ID and TYPE", "blueline react"},
		{[]string{"react", "msg_1", "love"}, "react needs --to", "blueline react"},
		{[]string{"typing"}, "typing takes TO", "blueline typing"},
		{[]string{"typing", "list", "--line", "+1"}, "typing list needs --line and --chat", "blueline typing list"},
		{[]string{"read"}, "read takes TO", "blueline read"},
		{[]string{"lines", "list", "x"}, `lines list takes no argument "x"`, "blueline lines list"},
		{[]string{"lines"}, "lines needs a subcommand: list", "blueline lines"},
		{[]string{"chats", "list"}, "chats list needs --line", "blueline chats list"},
		{[]string{"chats", "lease", "--line", "+1"}, "chats lease needs --line and --to: --to is missing", "blueline chats lease"},
		{[]string{"chats", "resume"}, "chats resume needs --line and --to: --line and --to are missing", "blueline chats resume"},
		{[]string{"messages", "list", "--line", "+1"}, "messages list needs --line and --chat", "blueline messages list"},
		{[]string{"messages", "get", "msg_1", "--chat", "+1"}, "messages get needs --line and --chat", "blueline messages get"},
		{[]string{"messages", "fetch"}, `unknown messages command "fetch" (list or get)`, "blueline messages"},
		{[]string{"files", "upload"}, "files upload takes PATH", "blueline files upload"},
		{[]string{"files", "get"}, "files get takes FILE_ID", "blueline files get"},
		{[]string{"outbox", "get"}, "outbox get takes OUTBOX_ID", "blueline outbox get"},
		{[]string{"webhooks", "create", "--url", "https://x"}, "webhooks create needs --url and at least one --event", "blueline webhooks create"},
		{[]string{"webhooks", "delete"}, "webhooks delete takes WEBHOOK_ID", "blueline webhooks delete"},
		{[]string{"webhooks", "list", "--owner", "me"}, "webhooks list takes --owner with --line", "blueline webhooks list"},
		{[]string{"sandbox", "status"}, "sandbox status needs --owner NAME on the host", "blueline sandbox status"},
		{[]string{"sandbox", "activate"}, "sandbox activate needs --owner NAME on the host", "blueline sandbox activate"},
	} {
		out, errOut, code := runCLIIn(t, strings.NewReader(""), c.args...)
		if code != 2 || out != "" {
			t.Errorf("blueline %s: exit %d, stdout %q, stderr %q; want exit 2", strings.Join(c.args, " "), code, out, errOut)
			continue
		}
		if !strings.Contains(errOut, c.msg) || !strings.HasSuffix(errOut, "\nRun '"+c.used+" --help' for usage.\n") || strings.Contains(errOut, "Usage:") {
			t.Errorf("blueline %s: stderr %q; want %q and the hint of %q", strings.Join(c.args, " "), errOut, c.msg, c.used)
		}
	}
}

// With no daemon, a local client command says so and exits 1.
func TestClientCommandWithoutDaemon(t *testing.T) {
	dir := t.TempDir()
	cfg := dir + "/b.toml"
	if err := os.WriteFile(cfg, []byte("[storage]\ndir = \""+dir+"/data\"\n[sandbox]\nhandle = \"+15550000000\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv(envBaseURL, "")
	out, errOut, code := runCLI(t, "", "lines", "list", "--config", cfg)
	if code != 1 || out != "" || !strings.Contains(errOut, "the daemon is not running") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// printFields shows a record's fields in its JSON order, without nulls and
// request_id, times readable.
func TestPrintFields(t *testing.T) {
	name := "cat.jpg"
	var b bytes.Buffer
	err := printFields(&b, "  ", struct {
		api.File
		CreatedAt int64    `json:"created_at"`
		Tags      []string `json:"tags"`
		Gone      *string  `json:"gone"`
	}{File: api.File{ID: "file_1", URL: "https://x/files/file_1", Filename: &name, MimeType: "image/jpeg", Size: 3, RequestID: "req_1"},
		CreatedAt: 1700000000000, Tags: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	want := `  id          file_1
  url         https://x/files/file_1
  filename    cat.jpg
  mime_type   image/jpeg
  size        3
  created_at  2023-11-14T22:13:20Z
  tags        ["a"]
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestMimeOf(t *testing.T) {
	for path, want := range map[string]string{
		"card.vcf": "text/vcard", "memo.M4A": "audio/mp4", "x.png": "image/png", "noext": "application/octet-stream",
	} {
		if got := mimeOf(path, ""); got != want {
			t.Errorf("mimeOf(%q) = %q, want %q", path, got, want)
		}
	}
	if got := mimeOf("memo", "audio/mp4"); got != "audio/mp4" {
		t.Errorf("fallback: %q", got)
	}
}

// A daemon running under another configuration is not found: the error
// names the socket tried, how the configuration was found, and how to name
// the daemon's.
func TestDaemonUnderAnotherConfiguration(t *testing.T) {
	d := daemontest.Start(t, "")
	t.Setenv(envBaseURL, "")
	t.Setenv(envData, "")
	t.Setenv("BLUELINE_CONFIG", "")
	hint := "name its file with --config FILE or BLUELINE_CONFIG=FILE"
	_, errOut, code := runCLI(t, "", "keys", "list")
	socket := adminsock.Path(config.Default().DataDir())
	if code != 1 || !strings.Contains(errOut, "the daemon is not running (no answer on "+socket+")") ||
		!strings.Contains(errOut, "the embedded default's data folder (no --config, no $BLUELINE_CONFIG, no installed service)") ||
		!strings.Contains(errOut, hint) {
		t.Errorf("keys list on the embedded default: exit %d, %q", code, errOut)
	}

	other := writeConfig(t, t.TempDir())
	_, errOut, code = runCLI(t, "", "lines", "list", "--config", other)
	if code != 1 || !strings.Contains(errOut, "no answer on "+adminsock.Path(filepath.Join(filepath.Dir(other), "data"))) ||
		!strings.Contains(errOut, "the data folder of "+other+" (from --config)") || !strings.Contains(errOut, hint) {
		t.Errorf("lines list on another file: exit %d, %q", code, errOut)
	}

	t.Setenv("BLUELINE_CONFIG", d.ConfigPath())
	if _, errOut, code := runCLI(t, "", "keys", "list"); code != 0 {
		t.Errorf("keys list with BLUELINE_CONFIG naming the daemon's: exit %d, %q", code, errOut)
	}
	t.Setenv(envData, t.TempDir())
	if _, errOut, code := runCLI(t, "", "keys", "list"); code != 1 || !strings.Contains(errOut, "(from BLUELINE_CONFIG), replaced by $BLUELINE_DATA=") {
		t.Errorf("keys list with another BLUELINE_DATA: exit %d, %q", code, errOut)
	}
}
