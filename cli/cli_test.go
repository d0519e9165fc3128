package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// runCLI runs the command line with the real environment (t.Setenv sets it)
// and installed as the installed service's configuration.
func runCLI(t *testing.T, installed string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	e := env{getenv: os.Getenv, installedConfig: func() string { return installed }}
	code = run(context.Background(), Build{}, args, nil, &out, &errOut, e)
	return out.String(), errOut.String(), code
}

// walk calls fn on every command of the tree under c, c included.
func walk(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walk(sub, fn)
	}
}

// Every command, subcommands and cobra's own included, has a one-line
// summary, its flags and an example in its help, by `help …` and --help.
func TestHelpOfEveryCommand(t *testing.T) {
	t.Setenv("BLUELINE_CONFIG", "")
	root := (&app{build: Build{}.orDefaults(), env: osEnv()}).rootCommand()
	n := 0
	walk(root, func(c *cobra.Command) {
		n++
		path := strings.Fields(c.CommandPath())[1:]
		name := strings.Join(path, " ")
		if c.Short == "" || strings.Contains(c.Short, "\n") {
			t.Errorf("%q: summary %q is not one line", name, c.Short)
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("%q has no example", name)
		}
		for _, args := range [][]string{append([]string{"help"}, path...), append(path, "--help")} {
			out, errOut, code := runCLI(t, "", args...)
			if code != 0 || errOut != "" {
				t.Errorf("blueline %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
				continue
			}
			for _, want := range []string{"Usage:", "Examples:", "Flags:", "--help"} {
				if !strings.Contains(out, want) {
					t.Errorf("blueline %s: no %q in %q", strings.Join(args, " "), want, out)
				}
			}
		}
	})
	if n < 25 {
		t.Errorf("walked %d commands: the tree is missing some", n)
	}
}

func TestHelpKeysCreate(t *testing.T) {
	out, errOut, code := runCLI(t, "", "help", "keys", "create")
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, %q", code, errOut)
	}
	for _, want := range []string{
		"Usage:\n  blueline keys create --label TEXT",
		"--label string", "--scopes string", "--lines string", "--owner string", "--json",
		"--config string", // the persistent flag
		"Examples:\n  blueline keys create --label my-app",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in\n%s", want, out)
		}
	}
}

func TestCompletion(t *testing.T) {
	for shell, want := range map[string]string{"bash": "bash completion", "zsh": "#compdef blueline", "fish": "complete -c blueline"} {
		out, errOut, code := runCLI(t, "", "completion", shell)
		if code != 0 || errOut != "" || !strings.Contains(out, want) {
			t.Errorf("completion %s: exit %d, stderr %q, %d bytes without %q", shell, code, errOut, len(out), want)
		}
	}
	if _, _, code := runCLI(t, "", "completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2", code)
	}
}

func TestSuggestions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"kyes"}, "Did you mean this?\n\tkeys"},
		{[]string{"webhook"}, "Did you mean this?\n\twebhooks"},
		{[]string{"keys", "creat"}, `unknown keys command "creat" (create, list or revoke); did you mean create?`},
		{[]string{"sim", "inboud"}, "did you mean inbound?"},
		{[]string{"help", "kyes"}, "unknown help topic \"kyes\"\n\nDid you mean this?\n\tkeys"},
		{[]string{"help", "keys", "nosuch"}, `unknown help topic "keys nosuch"`},
	} {
		out, errOut, code := runCLI(t, "", c.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, c.want) {
			t.Errorf("blueline %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}
}

// A usage error prints the message, then the usage of the command that was
// wrong, not the whole tree, and exits 2.
func TestUsageErrorPointsAtOwnHelp(t *testing.T) {
	for _, c := range []struct {
		args      []string
		msg, used string
	}{
		{[]string{"keys", "list", "--bogus"}, "unknown flag: --bogus", "blueline keys list"},
		{[]string{"keys", "revoke"}, "keys revoke takes one ID", "blueline keys revoke"},
		{[]string{"keys", "create"}, "keys create needs --label", "blueline keys create"},
		{[]string{"webhooks", "deliveries", "--limit", "many"}, `invalid argument "many"`, "blueline webhooks deliveries"},
		{[]string{"sim", "group", "--line", "+1", "--chat", "cht_x", "--by", "+2", "--add", ""}, "needs a handle", "blueline sim group"},
		{[]string{"sim", "inbound", "--line", "+15550000001", "--text", "hi"}, "sim inbound needs --line, --from and --text (or --attach or --audio): --from is missing", "blueline sim inbound"},
		{[]string{"sim", "inbound", "--from", "+15551234567"}, ": --line and --text are missing", "blueline sim inbound"},
		{[]string{"sim", "reaction", "--line", "+1", "--from", "+2", "--type", "love"}, "--message is missing", "blueline sim reaction"},
		{[]string{"nope"}, `unknown command "nope" for "blueline"`, "blueline"},
		{[]string{"backup"}, "backup takes one FILE to write", "blueline backup"},
		{[]string{"status", "now"}, `status takes no argument "now"`, "blueline status"},
		{[]string{"start", "--config", "x.toml"}, "start takes no --config", "blueline start"},
	} {
		out, errOut, code := runCLI(t, "", c.args...)
		if code != 2 || out != "" {
			t.Errorf("blueline %s: exit %d, stdout %q; want exit 2", strings.Join(c.args, " "), code, out)
			continue
		}
		if !strings.HasPrefix(errOut, "blueline: ") || !strings.Contains(errOut, c.msg) || !strings.HasSuffix(errOut, "\nRun '"+c.used+" --help' for usage.\n") ||
			strings.Count(errOut, "\n") != 2 || strings.Contains(errOut, "Usage:") {
			t.Errorf("blueline %s: stderr %q; want one line with %q, then the hint of %q", strings.Join(c.args, " "), errOut, c.msg, c.used)
		}
		if strings.Contains(errOut, "Available Commands:") {
			t.Errorf("blueline %s: the whole tree's usage: %q", strings.Join(c.args, " "), errOut)
		}
	}
}

func TestExitCodes(t *testing.T) {
	cfg := writeConfig(t, t.TempDir())
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"version"}, 0},
		{[]string{"--version"}, 0},
		{[]string{"help"}, 0},
		{[]string{}, 2},
		{[]string{"nope"}, 2},
		{[]string{"keys", "list", "--config", cfg}, 1}, // no daemon answers
		{[]string{"keys", "list", "--config", filepath.Join(t.TempDir(), "missing.toml")}, 1},
	} {
		if _, errOut, code := runCLI(t, "", c.args...); code != c.code {
			t.Errorf("blueline %s: exit %d, want %d (%q)", strings.Join(c.args, " "), code, c.code, errOut)
		}
	}
	out, _, _ := runCLI(t, "", "--version")
	if out != "blueline dev (commit unknown, built unknown)\n" {
		t.Errorf("--version: %q", out)
	}
}

// writeConfig writes a configuration whose data folder is under dir.
func writeConfig(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "blueline.toml")
	body := "[storage]\ndir = " + strconv.Quote(filepath.Join(dir, "data")) + "\n[sandbox]\nhandle = \"+15550000000\"\n"
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// The configuration is --config, else $BLUELINE_CONFIG, else the installed
// service's, else the embedded default; status says which.
func TestConfigDiscovery(t *testing.T) {
	flagCfg, envCfg, installedCfg := writeConfig(t, t.TempDir()), writeConfig(t, t.TempDir()), writeConfig(t, t.TempDir())
	for _, c := range []struct {
		name            string
		flag, env, inst string
		want, source    string
	}{
		{"all three", flagCfg, envCfg, installedCfg, flagCfg, "--config"},
		{"environment and service", "", envCfg, installedCfg, envCfg, "BLUELINE_CONFIG"},
		{"installed service", "", "", installedCfg, installedCfg, "the installed service"},
		{"nothing", "", "", "", "", "the embedded default"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("BLUELINE_CONFIG", c.env)
			args := []string{"status"}
			if c.flag != "" {
				args = append(args, "--config", c.flag)
			}
			out, errOut, code := runCLI(t, c.inst, append(args, "--json")...)
			if code != 1 || !strings.Contains(errOut, "not running") { // no daemon answers
				t.Errorf("exit %d, %q", code, errOut)
			}
			var r statusReport
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("status --json printed %q: %v", out, err)
			}
			if r.Config != c.want || r.ConfigSource != c.source || r.DaemonAnswers {
				t.Errorf("status: %+v; want config %q from %s", r, c.want, c.source)
			}
			if c.want != "" && r.DataDir != filepath.Join(filepath.Dir(c.want), "data") {
				t.Errorf("data folder %q: not the one of %s", r.DataDir, c.want)
			}

			out, _, _ = runCLI(t, c.inst, args...)
			want := "configuration: " + c.want + " (from " + c.source + ")\n"
			if c.want == "" {
				want = "configuration: the embedded default\n"
			}
			if !strings.Contains(out, want) || !strings.Contains(out, "daemon: does not answer on ") {
				t.Errorf("status printed %q; want %q", out, want)
			}
		})
	}
}

// install takes --config or $BLUELINE_CONFIG, never the embedded default.
func TestInstallNeedsAConfiguration(t *testing.T) {
	t.Setenv("BLUELINE_CONFIG", "")
	if _, errOut, code := runCLI(t, "/etc/blueline/blueline.toml", "install"); code != 2 || !strings.Contains(errOut, "install needs --config FILE") {
		t.Errorf("install: exit %d, %q", code, errOut)
	}
	t.Setenv("BLUELINE_CONFIG", filepath.Join(t.TempDir(), "missing.toml"))
	if _, errOut, code := runCLI(t, "", "install"); code != 1 || !strings.Contains(errOut, "missing.toml") {
		t.Errorf("install with BLUELINE_CONFIG: exit %d, %q", code, errOut)
	}
}

// The configuration of the installed service is read back from the service
// files as install writes them, and as the .deb ships its unit.
func TestConfigInServiceFile(t *testing.T) {
	for _, cfg := range []string{"/etc/blueline/blueline.toml", "/srv/with space/blueline.toml", "/srv/a&b/blueline.toml"} {
		u := unitSpec{Name: serviceName, Binary: "/usr/local/bin/blueline", Config: cfg, DataDir: "/var/lib/blueline", User: "blueline", LogFile: "/Users/x/Library/Logs/Blueline/blueline.log"}
		unit, err := renderSystemdUnit(u)
		if err != nil {
			t.Fatal(err)
		}
		if got := configInServiceFile(unit); got != cfg {
			t.Errorf("systemd unit: %q, want %q", got, cfg)
		}
		plist, err := renderLaunchdPlist(u)
		if err != nil {
			t.Fatal(err)
		}
		if got := configInServiceFile(plist); got != cfg {
			t.Errorf("LaunchAgent: %q, want %q", got, cfg)
		}
	}
	deb, err := os.ReadFile("../packaging/linux/blueline.service")
	if err != nil {
		t.Fatal(err)
	}
	if got := configInServiceFile(string(deb)); got != "/etc/blueline/blueline.toml" {
		t.Errorf("the .deb's unit: %q", got)
	}
	if got := configInServiceFile("[Service]\nExecStart=/usr/bin/other\n"); got != "" {
		t.Errorf("a unit without serve --config: %q", got)
	}
}

// Not on a terminal, lists are tab-separated lines without a header, as
// scripts read them; on one, aligned columns under a header.
func TestTables(t *testing.T) {
	rows := [][]string{{"key_1", "ci", "all"}, {"key_22", "a longer label", "messages:read"}}
	var script bytes.Buffer
	if err := printTable(&script, []string{"ID", "LABEL", "SCOPES"}, rows); err != nil {
		t.Fatal(err)
	}
	if want := "key_1\tci\tall\nkey_22\ta longer label\tmessages:read\n"; script.String() != want {
		t.Errorf("not a terminal: %q, want %q", script.String(), want)
	}
	var tty bytes.Buffer
	if err := writeAligned(&tty, []string{"ID", "LABEL", "SCOPES"}, rows); err != nil {
		t.Fatal(err)
	}
	want := "ID      LABEL           SCOPES\n" +
		"key_1   ci              all\n" +
		"key_22  a longer label  messages:read\n"
	if tty.String() != want {
		t.Errorf("terminal:\n%s\nwant:\n%s", tty.String(), want)
	}
}
