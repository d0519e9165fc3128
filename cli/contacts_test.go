package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
)

// The blocked list from the command line: add (normalised), list, export,
// import from a file and from stdin with its bad rows reported, remove;
// and the opted-out list with the word the contact wrote.
func TestContactsCommands(t *testing.T) {
	t.Setenv(envBaseURL, "")
	t.Setenv(envAPIKey, "")
	d := daemontest.Start(t, "")
	line, alice, bob := daemontest.MainLine, daemontest.Alice, daemontest.Bob

	var bc api.BlockedContact
	decodeJSON(t, "blocked add", mustCLI(t, d, "contacts", "blocked", "add", "--line", line, "+1 (555) 111-0001", "--json"), &bc)
	if bc.Handle != alice || bc.CreatedAt == 0 {
		t.Fatalf("blocked add: %+v", bc)
	}
	if out := mustCLI(t, d, "contacts", "blocked", "list", "--line", line); !strings.HasPrefix(out, alice+"\t") {
		t.Errorf("blocked list:\n%s", out)
	}
	export := mustCLI(t, d, "contacts", "blocked", "export", "--line", line)
	if export != "handle\n"+alice+"\n" {
		t.Errorf("blocked export: %q", export)
	}

	file := filepath.Join(t.TempDir(), "blocked.csv")
	if err := os.WriteFile(file, []byte("handle\n"+bob+"\nnot a handle\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustCLI(t, d, "contacts", "blocked", "import", "--line", line, file)
	if !strings.Contains(out, "added 1, blocked 1, rejected 1") || !strings.Contains(out, `row 3 "not a handle"`) {
		t.Errorf("blocked import of a file:\n%s", out)
	}
	if out, errOut, code := cliIn(d, export, "contacts", "blocked", "import", "--line", daemontest.PlainLine, "-"); code != 0 || !strings.Contains(out, "added 1, blocked 1, rejected 0") {
		t.Errorf("blocked import from stdin: exit %d, %s%s", code, out, errOut)
	}

	var un api.UnblockedContact
	decodeJSON(t, "blocked remove", mustCLI(t, d, "contacts", "blocked", "remove", "--line", line, alice, "--json"), &un)
	if !un.Deleted || un.Handle != alice {
		t.Errorf("blocked remove: %+v", un)
	}
	if _, errOut, code := cliOn(d, "contacts", "blocked", "remove", "--line", line, alice); code != 1 || !strings.Contains(errOut, "contact_not_blocked") {
		t.Errorf("removing a contact not blocked: exit %d, %s", code, errOut)
	}
	if _, errOut, code := cliOn(d, "contacts", "blocked", "list"); code != 2 || !strings.Contains(errOut, "needs --line") {
		t.Errorf("blocked list without --line: exit %d, %s", code, errOut)
	}

	d.Inbound(line, alice, " Stop ")
	out = mustCLI(t, d, "contacts", "opted-out", "list", "--line", line)
	if !strings.Contains(out, alice) || !strings.Contains(out, "Stop") || strings.Contains(out, bob) {
		t.Errorf("opted-out list:\n%s", out)
	}
	var page api.List[api.OptedOutContact]
	decodeJSON(t, "opted-out list", mustCLI(t, d, "contacts", "opted-out", "list", "--line", line, "--json"), &page)
	if len(page.Data) != 1 || page.Data[0].Word == nil || *page.Data[0].Word != "Stop" {
		t.Errorf("opted-out list --json: %+v", page)
	}
}
