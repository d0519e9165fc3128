package e2e

import (
	"encoding/json"
	"strings"
	"testing"
)

// The command line against a running daemon: status finds it through the
// configuration it names, and --json prints the lists for scripts.
func TestCLIStatusAndJSON(t *testing.T) {
	td := startTestDaemon(t, "")
	out := td.mustCLI("status")
	for _, want := range []string{"configuration: " + td.cfgPath + " (from --config)\n", "daemon: answers on "} {
		if !strings.Contains(out, want) {
			t.Errorf("status printed %q, without %q", out, want)
		}
	}
	var report struct {
		Config        string `json:"config"`
		ConfigSource  string `json:"config_source"`
		DaemonAnswers bool   `json:"daemon_answers"`
	}
	cliJSON(t, td.mustCLI("status", "--json"), &report)
	if report.Config != td.cfgPath || report.ConfigSource != "--config" || !report.DaemonAnswers {
		t.Errorf("status --json: %+v", report)
	}

	for _, list := range [][]string{{"keys", "list"}, {"webhooks", "list"}, {"webhooks", "deliveries"}} {
		if out := td.mustCLI(append(list, "--json")...); strings.TrimSpace(out) != "[]" {
			t.Errorf("%v --json, empty: %q", list, out)
		}
	}
	key := td.key("--owner", "ops@example.com")
	var keys []map[string]any
	cliJSON(t, td.mustCLI("keys", "list", "--json"), &keys)
	if len(keys) != 1 || keys[0]["label"] != "test" || keys[0]["owner"] != "ops@example.com" || keys[0]["key"] != nil {
		t.Fatalf("keys list --json: %v", keys)
	}
	// The table, not on a terminal: the tab-separated line scripts read.
	fields := strings.Split(strings.TrimSuffix(td.mustCLI("keys", "list"), "\n"), "\t")
	if len(fields) != 8 || fields[0] != keys[0]["id"] || fields[4] != "ops@example.com" || fields[6] != "no" || fields[7] != "none" {
		t.Errorf("keys list: %q", fields)
	}
	var created map[string]any
	cliJSON(t, td.mustCLI("keys", "create", "--label", "json", "--json"), &created)
	if s, _ := created["key"].(string); !strings.HasPrefix(s, "sk_live_") || s == key {
		t.Errorf("keys create --json: %v", created)
	}
	var revoked map[string]any
	cliJSON(t, td.mustCLI("keys", "revoke", keys[0]["id"].(string), "--json"), &revoked)
	if revoked["id"] != keys[0]["id"] || revoked["revoked"] != true {
		t.Errorf("keys revoke --json: %v", revoked)
	}
}

// A usage error prints its message and where the command's own usage is,
// and exits 2.
func TestCLIUsageErrors(t *testing.T) {
	td := startTestDaemon(t, "")
	_, errOut, code := td.cli("keys", "create")
	if code != 2 || !strings.Contains(errOut, "keys create needs --label") || !strings.HasSuffix(errOut, "\nRun 'blueline keys create --help' for usage.\n") || strings.Contains(errOut, "Usage:") ||
		strings.Contains(errOut, "sim inbound") {
		t.Errorf("keys create without --label: exit %d, %q", code, errOut)
	}
	if _, errOut, code := td.cli("kyes", "list"); code != 2 || !strings.Contains(errOut, "Did you mean this?\n\tkeys") {
		t.Errorf("kyes: exit %d, %q", code, errOut)
	}
}

// cliJSON decodes what a command printed. (Its own helper: delivery_test.go's
// decodeJSON is another engineer's.)
func cliJSON(t *testing.T, out string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
}
