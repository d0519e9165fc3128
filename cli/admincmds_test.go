package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/daemontest"
)

// cliIn runs a command against d's configuration with stdin, through Run.
func cliIn(d *daemontest.Daemon, stdin string, args ...string) (stdout, stderr string, code int) {
	var out, errOut bytes.Buffer
	code = Run(context.Background(), Build{}, append(args, "--config", d.ConfigPath()), strings.NewReader(stdin), &out, &errOut)
	return out.String(), errOut.String(), code
}

// keys create prints only the secret; keys list shows the key (never the
// secret) as tab-separated fields and as JSON; revoke removes it from the
// list, and revoking it again fails.
func TestKeysLifecycle(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")

	secret := strings.TrimSpace(mustCLI(t, d, "keys", "create", "--label", "ci", "--owner", "ops@example.com",
		"--scopes", "messages:read", "--lines", daemontest.MainLine, "--agent"))
	if !strings.HasPrefix(secret, "sk_live_") || strings.ContainsAny(secret, " \n\t") {
		t.Fatalf("keys create printed %q; want only an sk_live_ key", secret)
	}
	var created struct {
		ID, Label, Owner string
		Secret           string `json:"key"`
		Scopes           []string
	}
	decodeJSON(t, "keys create --json", mustCLI(t, d, "keys", "create", "--label", "all", "--json"), &created)
	if !strings.HasPrefix(created.ID, "key_") || created.Label != "all" || !strings.HasPrefix(created.Secret, "sk_live_") {
		t.Errorf("keys create --json: %+v", created)
	}

	out := mustCLI(t, d, "keys", "list")
	if strings.Contains(out, secret) || strings.Contains(out, created.Secret) {
		t.Errorf("keys list shows a secret:\n%s", out)
	}
	var ciID string
	for _, row := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(row, "\t")
		if len(f) != 8 {
			t.Fatalf("keys list row %q: %d fields, want 8", row, len(f))
		}
		switch f[1] {
		case "ci":
			ciID = f[0]
			if f[2] != "messages:read" || f[3] != daemontest.MainLine || f[4] != "ops@example.com" || f[6] != "yes" || f[7] != "none" {
				t.Errorf("keys list row for ci: %q", f)
			}
		case "all":
			if f[0] != created.ID || f[2] != "all" || f[3] != "all" || f[4] != "-" || f[6] != "no" {
				t.Errorf("keys list row for all: %q", f)
			}
		}
	}
	if ciID == "" {
		t.Fatalf("keys list has no key labelled ci:\n%s", out)
	}

	var listed []struct {
		ID, Label string
		Agent     bool
	}
	decodeJSON(t, "keys list --json", mustCLI(t, d, "keys", "list", "--json"), &listed)
	if len(listed) != 2 || listed[0].Agent == listed[1].Agent {
		t.Errorf("keys list --json: %+v; want 2 keys", listed)
	}

	if out := mustCLI(t, d, "keys", "revoke", ciID); out != "revoked "+ciID+"\n" {
		t.Errorf("keys revoke: %q", out)
	}
	var res map[string]any
	decodeJSON(t, "keys revoke --json", mustCLI(t, d, "keys", "revoke", created.ID, "--json"), &res)
	if res["id"] != created.ID || res["revoked"] != true {
		t.Errorf("keys revoke --json: %v", res)
	}
	if out := mustCLI(t, d, "keys", "list"); out != "" {
		t.Errorf("keys list after revoking both: %q; want nothing", out)
	}
	if out, errOut, code := cliOn(d, "keys", "revoke", ciID); code != 1 || out != "" || errOut == "" {
		t.Errorf("revoking a revoked key: exit %d, stdout %q, stderr %q; want 1 and an error", code, out, errOut)
	}
	if _, errOut, code := cliOn(d, "keys", "create"); code != 2 || !strings.Contains(errOut, "keys create needs --label") {
		t.Errorf("keys create without --label: exit %d, stderr %q", code, errOut)
	}
}

// dashboard password reads stdin's first line, refuses an empty one and
// a short one; --remove removes it. sessions lists none; signout needs
// an ID or --all.
func TestDashboardPasswordAndSessions(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")

	if out, _, code := cliIn(d, "correct horse battery staple\nignored\n", "dashboard", "password"); code != 0 || out != "password set\n" {
		t.Errorf("dashboard password: exit %d, stdout %q", code, out)
	}
	if _, errOut, code := cliIn(d, "", "dashboard", "password"); code != 2 || !strings.Contains(errOut, "needs a password on stdin") {
		t.Errorf("dashboard password with empty stdin: exit %d, stderr %q; want 2", code, errOut)
	}
	if out, errOut, code := cliIn(d, "short\n", "dashboard", "password"); code != 1 || out != "" || errOut == "" {
		t.Errorf("dashboard password too short: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}
	if out := mustCLI(t, d, "dashboard", "password", "--remove"); out != "password removed: only login links sign in\n" {
		t.Errorf("dashboard password --remove: %q", out)
	}

	if out := mustCLI(t, d, "dashboard", "sessions"); out != "" {
		t.Errorf("dashboard sessions with none: %q", out)
	}
	if out := strings.TrimSpace(mustCLI(t, d, "dashboard", "sessions", "--json")); out != "[]" {
		t.Errorf("dashboard sessions --json with none: %q; want []", out)
	}
	if out := mustCLI(t, d, "dashboard", "signout", "--all"); out != "0 session(s) ended\n" {
		t.Errorf("dashboard signout --all: %q", out)
	}
	for _, args := range [][]string{{"dashboard", "signout"}, {"dashboard", "signout", "ses_1", "--all"}, {"dashboard", "signout", "a", "b"}} {
		if out, errOut, code := cliOn(d, args...); code != 2 || out != "" || !strings.Contains(errOut, "dashboard signout") {
			t.Errorf("blueline %s: exit %d, stdout %q, stderr %q; want 2", strings.Join(args, " "), code, out, errOut)
		}
	}
}

// backup writes a copy that restore puts back on the stopped daemon:
// a key created after the backup is gone once restored. backup refuses an
// existing file without --force; restore refuses a running daemon.
func TestBackupRestore(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	mustCLI(t, d, "keys", "create", "--label", "before")

	file := filepath.Join(t.TempDir(), "b.bolt")
	out := mustCLI(t, d, "backup", file)
	if !strings.HasPrefix(out, "wrote "+file+" (") || !strings.Contains(out, filepath.Join(d.DataDir(), "files")) {
		t.Errorf("backup: %q", out)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
		t.Errorf("backup file: mode %v, size %d; want 0600 and not empty", fi.Mode().Perm(), fi.Size())
	}
	if out, errOut, code := cliOn(d, "backup", file); code != 1 || out != "" || !strings.Contains(errOut, "exists") || !strings.Contains(errOut, "--force") {
		t.Errorf("backup over an existing file: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}
	mustCLI(t, d, "keys", "create", "--label", "after")
	mustCLI(t, d, "backup", "--force", file)
	mustCLI(t, d, "keys", "create", "--label", "later")
	entries, _ := os.ReadDir(filepath.Dir(file))
	if len(entries) != 1 {
		t.Errorf("backup left files beside it: %v", entries)
	}

	if out, errOut, code := cliOn(d, "restore", file); code != 1 || out != "" || !strings.Contains(errOut, "the daemon is running") {
		t.Errorf("restore on a running daemon: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}
	d.Stop()
	out = mustCLI(t, d, "restore", file)
	if !strings.HasPrefix(out, "restored "+file) || !strings.Contains(out, "before-restore") {
		t.Errorf("restore: %q", out)
	}
	if out, errOut, code := cliOn(d, "restore", filepath.Join(t.TempDir(), "none.bolt")); code != 1 || out != "" || !strings.Contains(errOut, "restore") {
		t.Errorf("restore of a missing file: exit %d, stdout %q, stderr %q; want 1", code, out, errOut)
	}
	d.Start()
	keys := mustCLI(t, d, "keys", "list")
	if !strings.Contains(keys, "\tbefore\t") || !strings.Contains(keys, "\tafter\t") || strings.Contains(keys, "\tlater\t") {
		t.Errorf("keys after restore: want before and after, not later:\n%s", keys)
	}

}
