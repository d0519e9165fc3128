package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/keyword"
)

// oneLine is the smallest valid document; cases append their own tables
// before it so its keys stay inside [[lines]].
const oneLine = "[[lines]]\nhandle = \"+15550000001\"\n"

// writeConfig puts doc in a fresh file and returns its path.
func writeConfig(t *testing.T, doc string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "blueline.toml")
	if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustLoad(t *testing.T, doc string) *config.Config {
	t.Helper()
	c, err := config.Load(writeConfig(t, doc))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

func TestDefault(t *testing.T) {
	c := config.Default() // panics if the embedded file is broken
	checks := []struct {
		name      string
		got, want any
	}{
		{"Path", c.Path, ""},
		{"Server.Listen", c.Server.Listen, "127.0.0.1:8080"},
		{"Server.PublicURL", c.Server.PublicURL, ""},
		{"PublicBaseURL", c.PublicBaseURL(), "http://127.0.0.1:8080"},
		{"Storage.Dir", c.Storage.Dir, "./blueline-data"},
		{"len(Lines)", len(c.Lines), 1},
		{"Sandbox.Handle", c.Sandbox.Handle, "+15550000000"},
		{"Sandbox.Label", c.Sandbox.Label, "Sandbox"},
		{"Sandbox.DailyQuota", c.Sandbox.DailyQuota, 50},
		{"Sandbox.Advanced", c.Sandbox.Advanced(), true},
		{"Limits.RequestsPerHour", c.Limits.RequestsPerHour, 1000},
		{"Limits.MaxBodyBytes", c.Limits.MaxBodyBytes, int64(1 << 20)},
		{"Delivery.MaxAttempts", c.Delivery.MaxAttempts, 5},
		{"Delivery.Workers", c.Delivery.Workers, 4},
		{"Delivery.RetryBase", c.Delivery.RetryBase.Duration, time.Second},
		{"Delivery.RetryMax", c.Delivery.RetryMax.Duration, 5 * time.Minute},
		{"Sim.Latency", c.Sim.Latency.Duration, time.Duration(0)},
		{"Log.Level", c.Log.Level, "info"},
		{"Log.Format", c.Log.Format, "text"},
		{"TLS.Enabled", c.TLS.Enabled(), false},
		{"TLS.CA", c.TLS.CA, "production"},
		{"TLS.DirectoryURL", c.TLS.DirectoryURL(), config.LetsEncryptProduction},
		{"TLS.HTTPListen", c.TLS.HTTPListen, ":80"},
		{"TLS.HTTPSListen", c.TLS.HTTPSListen, ":443"},
	}
	for _, ch := range checks {
		if ch.got != ch.want {
			t.Errorf("%s = %v, want %v", ch.name, ch.got, ch.want)
		}
	}
	want := config.Line{Handle: "+15550000001", Label: "Main line", Bridge: "sim", Service: "imessage", AdvancedFeatures: true,
		OptOutWords: keyword.DefaultOptOut, OptInWords: keyword.DefaultOptIn, TakeoverQuiet: config.Duration{Duration: config.DefaultTakeoverQuiet},
		SelfHandles: []string{"+15550000001"},
		Takeover:    config.TakeoverRefuse, Approval: config.ApprovalNone, ApprovalTTL: config.Duration{Duration: config.DefaultApprovalTTL}}
	if len(c.Lines) == 1 && !reflect.DeepEqual(c.Lines[0], want) {
		t.Errorf("Lines[0] = %+v, want %+v", c.Lines[0], want)
	}

	// Callers may adjust what they get; the next caller must not see it.
	c.Lines[0].Label = "changed"
	if got := config.Default().Lines[0].Label; got != "Main line" {
		t.Errorf("second Default() sees the first caller's change: label %q", got)
	}
}

func TestExampleFile(t *testing.T) {
	const path = "../config.example.toml"
	c, err := config.Load(path)
	if err != nil {
		t.Fatalf("the example configuration must load: %v", err)
	}
	if c.Path != path {
		t.Errorf("Path = %q, want %q", c.Path, path)
	}
	if c.Server.Listen != "127.0.0.1:8080" || c.Storage.Dir != "./blueline-data" {
		t.Errorf("server/storage = %q, %q", c.Server.Listen, c.Storage.Dir)
	}
	if len(c.Lines) != 1 || c.Lines[0].Handle != "+15550000001" || c.Lines[0].Bridge != "sim" {
		t.Errorf("Lines = %+v, want the one sim line", c.Lines)
	}
	if c.Sandbox.Handle != "+15550000000" || c.Sandbox.DailyQuota != 50 {
		t.Errorf("Sandbox = %+v", c.Sandbox)
	}
	if c.Limits.RequestsPerHour != 1000 || c.Delivery.RetryMax.Duration != 5*time.Minute {
		t.Errorf("commented-out settings did not keep their defaults: %+v %+v", c.Limits, c.Delivery)
	}
}

// The example documents settings commented out; uncommented they must still
// be valid, or copying a line from it would break someone's daemon.
func TestExampleFileUncommented(t *testing.T) {
	data, err := os.ReadFile("../config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for line := range strings.Lines(string(data)) {
		// A setting is "# key = value": one word, then " = ".
		if rest, ok := strings.CutPrefix(line, "# "); ok {
			if key, _, ok := strings.Cut(rest, " = "); ok && !strings.Contains(key, " ") {
				line = rest
			}
		}
		out = append(out, line)
	}
	// The commented-out [[lines]] header stays commented, so its keys would
	// land in the first line's table twice: drop them, they are checked by
	// the messages-bridge case in TestLoadErrors instead.
	doc := strings.Join(out, "")
	if i := strings.Index(doc, "# [[lines]]"); i >= 0 {
		j := strings.Index(doc[i:], "[limits]")
		doc = doc[:i] + doc[i+j:]
	}
	c := mustLoad(t, doc)
	// The example's keyword lists are the defaults it says they are.
	if l := c.Lines[0]; !slices.Equal(l.OptOutWords, keyword.DefaultOptOut) || !slices.Equal(l.OptInWords, keyword.DefaultOptIn) {
		t.Errorf("the example's keyword lists %q, %q are not keyword's defaults", l.OptOutWords, l.OptInWords)
	}
	if c.Sandbox.Label != "Sandbox" || c.Log.Format != "text" || c.Limits.MaxBodyBytes != 1<<20 {
		t.Errorf("uncommented defaults differ: %+v %+v %+v", c.Sandbox, c.Log, c.Limits)
	}
	if c.TLS.Enabled() || c.TLS.CA != "production" || c.TLS.HTTPListen != ":80" || c.TLS.HTTPSListen != ":443" {
		t.Errorf("uncommented [tls] defaults differ: %+v", c.TLS)
	}
}

func TestLoadMissingFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "nope.toml")
	_, err := config.Load(path)
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Load(missing) = %v, want fs.ErrNotExist", err)
	}
	// The path once, not "config X: open X: …".
	if want := "config " + path + ": cannot read it: no such file or directory"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

// A file that cannot be read (here a folder, which even root cannot read
// as a file) is named once.
func TestLoadUnreadableFile(t *testing.T) {
	path := t.TempDir()
	_, err := config.Load(path)
	if err == nil {
		t.Fatal("Load(folder) succeeded")
	}
	if want := "config " + path + ": cannot read it: is a directory"; err.Error() != want {
		t.Errorf("error %q, want %q", err, want)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string // each must appear in the error, after "config FILE"
	}{
		{
			name: "unknown key with line",
			doc:  "[[lines]]\nhandle = \"+15550000001\"\nservise = \"sms\"\n",
			want: []string{`:3: unknown key "lines.servise"`},
		},
		{
			name: "every unknown key reported",
			doc:  "[server]\nlisten = \"127.0.0.1:1\"\nport = 80\n[storage]\ndirectory = \"x\"\n" + oneLine,
			want: []string{`:3: unknown key "server.port"`, `:5: unknown key "storage.directory"`},
		},
		{
			name: "unknown table",
			doc:  "[dashbord]\nurl = \"http://x\"\n" + oneLine,
			want: []string{`:1: unknown key "dashbord"`},
		},
		{
			name: "syntax error",
			doc:  oneLine + "[server\nlisten = \"x\"\n",
			want: []string{":3: "},
		},
		{
			name: "wrong type",
			doc:  "[sandbox]\ndaily_quota = \"ten\"\n" + oneLine,
			want: []string{":2: sandbox.daily_quota: must be a whole number, got a TOML string"},
		},
		{
			name: "lines as a number",
			doc:  "lines = 3\n",
			want: []string{":1: lines: must be an array of tables, got a TOML integer"},
		},
		{
			name: "bad service",
			doc:  oneLine + "[[lines]]\nhandle = \"+15550000002\"\nservice = \"mms\"\n",
			want: []string{`lines[1].service: must be "imessage" or "sms", got "mms"`},
		},
		{
			name: "bad bridge",
			doc:  oneLine + "bridge = \"imessage\"\n",
			want: []string{`lines[0].bridge: must be "sim" or "messages", got "imessage"`},
		},
		{
			name: "messages-only settings on a sim line",
			doc:  oneLine + "sms_fallback = true\nsend_timeout = \"5s\"\n",
			want: []string{`lines[0].sms_fallback: is a setting of bridge = "messages" only`, `lines[0].send_timeout: is a setting of bridge = "messages" only`},
		},
		{
			name: "send timeouts out of range",
			doc:  oneLine + "[[lines]]\nhandle = \"+15550000002\"\nbridge = \"messages\"\nsend_timeout = \"500ms\"\nfile_send_timeout = \"2h\"\n",
			want: []string{`lines[1].send_timeout: must be at least 1s, got 500ms`, `lines[1].file_send_timeout: must be at most 1h, got 2h0m0s`},
		},
		{
			name: "duplicate line handle after normalising",
			doc:  oneLine + "[[lines]]\nhandle = \"+1 (555) 000-0001\"\n",
			want: []string{`lines[1].handle: "+15550000001" is already used by lines[0]`},
		},
		{
			name: "sandbox handle duplicates a line",
			doc:  "[sandbox]\nhandle = \"+1 555 000 0001\"\n" + oneLine,
			want: []string{`sandbox.handle: "+15550000001" is already used by lines[0]`},
		},
		{
			name: "bad handle",
			doc:  "[[lines]]\nhandle = \"555-CALL-NOW\"\n",
			want: []string{`lines[0].handle: "555-CALL-NOW" is not a phone number`},
		},
		{
			name: "bad sandbox handle",
			doc:  "[sandbox]\nhandle = \"sandbox\"\n",
			want: []string{`sandbox.handle: "sandbox" is not a phone number`},
		},
		{
			name: "missing handle",
			doc:  "[[lines]]\nlabel = \"no number\"\n",
			want: []string{"lines[0].handle: is required"},
		},
		{
			name: "no lines at all",
			doc:  "[sandbox]\ndaily_quota = 10\n",
			want: []string{"lines: no lines configured"},
		},
		{
			name: "an empty list of lines",
			doc:  "lines = []\n",
			want: []string{"lines: no lines configured"},
		},
		{
			name: "negative quota",
			doc:  "[sandbox]\nhandle = \"+15550000000\"\ndaily_quota = -1\n",
			want: []string{"sandbox.daily_quota: must be at least 1, got -1"},
		},
		{
			name: "bad duration",
			doc:  "[delivery]\nretry_base = \"soon\"\n" + oneLine,
			want: []string{`:2: delivery.retry_base: invalid duration "soon"`},
		},
		{
			name: "duration without unit",
			doc:  "[sim]\nlatency = 5\n" + oneLine,
			want: []string{`:2: sim.latency: invalid duration 5: write a quoted number with a unit`, `"1s"`},
		},
		{
			name: "quoted duration without unit",
			doc:  oneLine + "[[lines]]\nhandle = \"+15550000002\"\nbridge = \"messages\"\npoll = \"5\"\n",
			want: []string{`:6: lines[1].poll: invalid duration 5: write a quoted number with a unit`},
		},
		{
			name: "bare duration in an array table",
			doc:  oneLine + "[[lines]]\nhandle = \"+15550000002\"\nbridge = \"messages\"\n\npoll = 5\n",
			want: []string{`:7: lines[1].poll: invalid duration 5`},
		},
		{
			name: "bare duration in a list",
			doc:  "[webhooks]\nretry_schedule = [\"5s\",\n  30]\n" + oneLine,
			want: []string{`:3: webhooks.retry_schedule[1]: invalid duration 30`},
		},
		{
			name: "fractional duration without unit",
			doc:  "[webhooks]\ntimeout = 1.5\n" + oneLine,
			want: []string{`:2: webhooks.timeout: invalid duration 1.5`},
		},
		{
			name: "negative latency",
			doc:  "[sim]\nlatency = \"-1s\"\n" + oneLine,
			want: []string{"sim.latency: must not be negative, got -1s"},
		},
		{
			name: "zero retry base",
			doc:  "[delivery]\nretry_base = \"0s\"\n" + oneLine,
			want: []string{"delivery.retry_base: must be more than 0s"},
		},
		{
			name: "retry max below base",
			doc:  "[delivery]\nretry_base = \"10s\"\nretry_max = \"1s\"\n" + oneLine,
			want: []string{"delivery.retry_max: must be at least retry_base (10s), got 1s"},
		},
		{
			name: "attempts and workers out of range",
			doc:  "[delivery]\nmax_attempts = 0\nworkers = 257\n" + oneLine,
			want: []string{"delivery.max_attempts: must be from 1 to 100, got 0", "delivery.workers: must be from 1 to 256, got 257"},
		},
		{
			name: "guard out of range",
			doc:  "[guard]\npace = \"2m\"\nmax_unanswered = -1\nmax_ratio = 1001\nmax_cold_contacts = 100001\ncold_after = \"30m\"\n" + oneLine,
			want: []string{`guard.pace: must be from "0s" (no pacing) to "1m", got 2m0s`,
				"guard.max_unanswered: must be from 0 (no cap) to 1000, got -1",
				"guard.max_ratio: must be from 0 (no cap) to 1000, got 1001",
				"guard.max_cold_contacts: must be from 0 (no cap) to 100000, got 100001",
				`guard.cold_after: must be from "1h" to "720h" (30 days), got 30m0s`},
		},
		{
			name: "takeover_quiet out of range",
			doc:  "[[lines]]\nhandle = \"+15550000001\"\ntakeover_quiet = \"30s\"\n[[lines]]\nhandle = \"+15550000002\"\ntakeover_quiet = \"25h\"\n",
			want: []string{"lines[0].takeover_quiet: must be from 1m to 24h, got 30s", "lines[1].takeover_quiet: must be from 1m to 24h, got 25h0m0s"},
		},
		{
			name: "self_handles not handles",
			doc:  "[[lines]]\nhandle = \"+15550000001\"\nself_handles = [\"+15550000001\", \"not a handle\"]\n",
			want: []string{"lines[0].self_handles[1]: \"not a handle\" is"},
		},
		{
			name: "approval settings out of range",
			doc: "[[lines]]\nhandle = \"+15550000001\"\napproval = \"always\"\ntakeover = \"queue\"\napproval_ttl = \"30s\"\n" +
				"[[lines]]\nhandle = \"+15550000002\"\napproval_except = [\"+15551110001\"]\napproval_ttl = \"169h\"\n" +
				"[[lines]]\nhandle = \"+15550000003\"\napproval = \"required\"\napproval_except = [\"not a handle\"]\n",
			want: []string{"lines[0].takeover", "lines[0].approval", "lines[0].approval_ttl: must be from 1m to 168h (7 days), got 30s",
				"lines[1].approval_except: lists contacts exempt from approval, but approval is not \"required\"", "lines[1].approval_ttl",
				"lines[2].approval_except[0]"},
		},
		{
			name: "guard of a line not a boolean",
			doc:  "[[lines]]\nhandle = \"+15550000001\"\nguard = \"yes\"\n",
			want: []string{"guard"},
		},
		{
			name: "negative requests per hour",
			doc:  "[limits]\nrequests_per_hour = -5\n" + oneLine,
			want: []string{"limits.requests_per_hour: must be 0 (no limit) or more, got -5"},
		},
		{
			name: "tiny body limit",
			doc:  "[limits]\nmax_body_bytes = 100\n" + oneLine,
			want: []string{"limits.max_body_bytes: must be at least 1024, got 100"},
		},
		{
			name: "listen without port",
			doc:  "[server]\nlisten = \"localhost\"\n" + oneLine,
			want: []string{`server.listen: must be host:port`, `got "localhost"`},
		},
		{
			name: "listen port out of range",
			doc:  "[server]\nlisten = \":70000\"\n" + oneLine,
			want: []string{`server.listen: port must be a number from 0 to 65535, got "70000"`},
		},
		{
			name: "public url not http",
			doc:  "[server]\npublic_url = \"ftp://example.com\"\n" + oneLine,
			want: []string{`server.public_url: must be an absolute http:// or https:// URL, got "ftp://example.com"`},
		},
		{
			name: "public url relative",
			doc:  "[server]\npublic_url = \"/blueline\"\n" + oneLine,
			want: []string{`server.public_url: must be an absolute http:// or https:// URL`},
		},
		{
			name: "public url with query",
			doc:  "[server]\npublic_url = \"https://example.com/?x=1\"\n" + oneLine,
			want: []string{"server.public_url: must not have a query or fragment"},
		},
		{
			name: "empty storage dir",
			doc:  "[storage]\ndir = \"\"\n" + oneLine,
			want: []string{"storage.dir: must not be empty"},
		},
		{
			name: "tls wildcard domain",
			doc:  "[tls]\ndomains = [\"*.example.com\"]\n" + oneLine,
			want: []string{`tls.domains[0]: "*.example.com" is a wildcard: wildcard certificates need the DNS-01 challenge`},
		},
		{
			name: "tls domains not domain names",
			doc: "[tls]\ndomains = [\"\", \"192.0.2.1\", \"https://example.com\", \"bad_name.example.com\", \"example.com.\", \"-x.example.com\"]\n" +
				oneLine,
			want: []string{
				`tls.domains[0]: must not be empty`,
				`tls.domains[1]: "192.0.2.1" is an IP address`,
				`tls.domains[2]: "https://example.com" must be a domain name alone, without scheme, port or path`,
				`tls.domains[3]: "bad_name.example.com" is not a domain name`,
				`tls.domains[4]: "example.com." is not a domain name`,
				`tls.domains[5]: "-x.example.com" is not a domain name`,
			},
		},
		{
			name: "tls duplicate domain after lower-casing",
			doc:  "[tls]\ndomains = [\"api.example.com\", \"API.Example.com\"]\n" + oneLine,
			want: []string{`tls.domains[1]: "api.example.com" is already listed as tls.domains[0]`},
		},
		{
			name: "tls domains not an array",
			doc:  "[tls]\ndomains = \"example.com\"\n" + oneLine,
			want: []string{":2: tls.domains: must be an array of strings, got a TOML string"},
		},
		{
			name: "tls bad email, ca and listens",
			doc: "[tls]\ndomains = [\"example.com\"]\nemail = \"admin\"\nca = \"http://ca.internal/dir\"\n" +
				"http_listen = \"80\"\nhttps_listen = \":99999\"\n" + oneLine,
			want: []string{
				`tls.email: must be an e-mail address such as "admin@example.com", got "admin"`,
				`tls.ca: must be "production", "staging" or the https:// directory URL of an ACME CA, got "http://ca.internal/dir"`,
				`tls.http_listen: must be host:port such as "0.0.0.0:80" or ":80", got "80"`,
				`tls.https_listen: port must be a number from 0 to 65535, got "99999"`,
			},
		},
		{
			name: "tls same address twice",
			doc:  "[tls]\ndomains = [\"example.com\"]\nhttp_listen = \":8443\"\nhttps_listen = \":8443\"\n" + oneLine,
			want: []string{`tls.https_listen: must differ from tls.http_listen, got ":8443" for both`},
		},
		{
			name: "tls trusted roots missing",
			doc:  "[tls]\ndomains = [\"example.com\"]\ntrusted_roots = \"/nonexistent/roots.pem\"\n" + oneLine,
			want: []string{`tls.trusted_roots: open /nonexistent/roots.pem: no such file or directory`},
		},
		{
			name: "tls settings without domains",
			doc:  "[tls]\nemail = \"admin@example.com\"\nca = \"staging\"\n" + oneLine,
			want: []string{
				"tls.email: is set but tls.domains is empty, so TLS is off: list the domains to serve",
				"tls.ca: is set but tls.domains is empty",
			},
		},
		{
			name: "log level and format",
			doc:  "[log]\nlevel = \"verbose\"\nformat = \"xml\"\n" + oneLine,
			want: []string{
				`log.level: must be "debug", "info", "warn" or "error", got "verbose"`,
				`log.format: must be "text" or "json", got "xml"`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.doc)
			_, err := config.Load(path)
			if err == nil {
				t.Fatal("Load succeeded, want an error")
			}
			msg := err.Error()
			for _, line := range strings.Split(msg, "\n") {
				if !strings.HasPrefix(line, "config "+path) {
					t.Errorf("error line %q does not name the file", line)
				}
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q\ndoes not contain %q", msg, w)
				}
			}
		})
	}
}

func TestBadHandleWrapsErrInvalid(t *testing.T) {
	_, err := config.Parse("test", []byte("[[lines]]\nhandle = \"nope\"\n"))
	if !errors.Is(err, handle.ErrInvalid) {
		t.Fatalf("err = %v, want handle.ErrInvalid inside", err)
	}
}

func TestParseNamesDocument(t *testing.T) {
	_, err := config.Parse("inline.toml", []byte("[log]\nlevel = \"loud\"\n"+oneLine))
	if err == nil || !strings.HasPrefix(err.Error(), "config inline.toml: log.level: ") {
		t.Fatalf("err = %v, want it to start with the document name and key", err)
	}
}

func TestRequestsPerHourAbsentVersusZero(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want int
	}{
		{"absent", oneLine, 1000},
		{"table without the key", "[limits]\nmax_body_bytes = 4096\n" + oneLine, 1000},
		{"explicit zero disables", "[limits]\nrequests_per_hour = 0\n" + oneLine, 0},
		{"explicit value", "[limits]\nrequests_per_hour = 60\n" + oneLine, 60},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := mustLoad(t, tt.doc).Limits.RequestsPerHour; got != tt.want {
				t.Errorf("RequestsPerHour = %d, want %d", got, tt.want)
			}
		})
	}
}

// self_handles are normalised as the line's handle is.
func TestSelfHandles(t *testing.T) {
	c := mustLoad(t, "[[lines]]\nhandle = \"+15550000001\"\nself_handles = [\"+1 (555) 000-0001\", \"Owner@Example.com\"]\n")
	if want := []string{"+15550000001", "owner@example.com"}; !reflect.DeepEqual(c.Lines[0].SelfHandles, want) {
		t.Errorf("SelfHandles = %q, want %q", c.Lines[0].SelfHandles, want)
	}
}

func TestMinimalFileTakesDefaults(t *testing.T) {
	c := mustLoad(t, oneLine)
	want := config.Line{Handle: "+15550000001", Bridge: "sim", Service: "imessage", OptOutWords: keyword.DefaultOptOut, OptInWords: keyword.DefaultOptIn,
		TakeoverQuiet: config.Duration{Duration: 20 * time.Minute}, SelfHandles: []string{"+15550000001"}, Takeover: "refuse", Approval: "none", ApprovalTTL: config.Duration{Duration: time.Hour}}
	if !reflect.DeepEqual(c.Lines[0], want) {
		t.Errorf("Lines[0] = %+v, want %+v", c.Lines[0], want)
	}
	if c.Sandbox.Handle != "" || !c.Sandbox.Advanced() || c.Sandbox.DailyQuota != 50 {
		t.Errorf("Sandbox = %+v, want disabled with defaults", c.Sandbox)
	}
	if c.Server.Listen != "127.0.0.1:8080" || c.Log.Level != "info" || c.Delivery.Workers != 4 {
		t.Errorf("defaults not applied: %+v %+v %+v", c.Server, c.Log, c.Delivery)
	}
}

// A file with neither [[lines]] nor [sandbox] keeps the default's; one
// that names either has only what it names.
func TestFileWithoutLinesTakesDefaultLines(t *testing.T) {
	def := config.Default()
	c := mustLoad(t, "[server]\nlisten = \"127.0.0.1:9090\"\n[storage]\ndir = \"./elsewhere\"\n")
	if !c.DefaultLines || !reflect.DeepEqual(c.Lines, def.Lines) || c.Sandbox.Handle != def.Sandbox.Handle || len(c.Lines) == 0 {
		t.Errorf("lines %+v sandbox %+v (default lines %v), want the default's %+v %+v", c.Lines, c.Sandbox, c.DefaultLines, def.Lines, def.Sandbox)
	}
	if c.Server.Listen != "127.0.0.1:9090" || c.Storage.Dir != "./elsewhere" {
		t.Errorf("the file's own values lost: %+v %+v", c.Server, c.Storage)
	}
	if def.DefaultLines {
		t.Error("the embedded default says its lines are borrowed")
	}

	c = mustLoad(t, oneLine)
	if c.DefaultLines || len(c.Lines) != 1 || c.Sandbox.Handle != "" {
		t.Errorf("a file with a line got %+v and sandbox %q", c.Lines, c.Sandbox.Handle)
	}
	c = mustLoad(t, "[sandbox]\nhandle = \"+15550000008\"\n")
	if c.DefaultLines || len(c.Lines) != 0 || c.Sandbox.Handle != "+15550000008" {
		t.Errorf("a file with a sandbox got lines %+v and sandbox %q", c.Lines, c.Sandbox.Handle)
	}
}

func TestSandboxAdvancedFalse(t *testing.T) {
	c := mustLoad(t, "[sandbox]\nhandle = \"+15550000000\"\nadvanced_features = false\n")
	if c.Sandbox.Advanced() {
		t.Error("advanced_features = false not honoured")
	}
}

func TestHandlesNormalised(t *testing.T) {
	c := mustLoad(t, "[sandbox]\nhandle = \" +1 555 000 0008 \"\n"+
		"[[lines]]\nhandle = \"+1 (555) 000-0009\"\n"+
		"[[lines]]\nhandle = \"Jane.Doe@Example.com\"\nservice = \"imessage\"\n")
	if got := c.Lines[0].Handle; got != "+15550000009" {
		t.Errorf("lines[0].handle = %q, want +15550000009", got)
	}
	if got := c.Lines[1].Handle; got != "jane.doe@example.com" {
		t.Errorf("lines[1].handle = %q, want jane.doe@example.com", got)
	}
	if got := c.Sandbox.Handle; got != "+15550000008" {
		t.Errorf("sandbox.handle = %q, want +15550000008", got)
	}
}

func TestTLS(t *testing.T) {
	roots := writeFile(t, "roots.pem", selfSignedPEM(t))
	c := mustLoad(t, "[tls]\ndomains = [\" Blueline.Example.COM \", \"api.example.com\"]\nemail = \"ops@example.com\"\n"+
		"ca = \"https://ca.internal:14000/dir\"\nhttp_listen = \"127.0.0.1:8080\"\nhttps_listen = \"127.0.0.1:8443\"\n"+
		"trusted_roots = \""+roots+"\"\n"+oneLine)
	if !c.TLS.Enabled() || len(c.TLS.Domains) != 2 || c.TLS.Domains[0] != "blueline.example.com" || c.TLS.Domains[1] != "api.example.com" {
		t.Errorf("TLS = %+v, want on with the domains lower-cased", c.TLS)
	}
	if got := c.TLS.DirectoryURL(); got != "https://ca.internal:14000/dir" {
		t.Errorf("DirectoryURL() = %q", got)
	}
	for ca, want := range map[string]string{"production": config.LetsEncryptProduction, "staging": config.LetsEncryptStaging} {
		c := mustLoad(t, "[tls]\ndomains = [\"example.com\"]\nca = \""+ca+"\"\n"+oneLine)
		if got := c.TLS.DirectoryURL(); got != want {
			t.Errorf("ca = %q: DirectoryURL() = %q, want %q", ca, got, want)
		}
	}

	notPEM := writeFile(t, "empty.pem", []byte("not a certificate\n"))
	_, err := config.Load(writeConfig(t, "[tls]\ndomains = [\"example.com\"]\ntrusted_roots = \""+notPEM+"\"\n"+oneLine))
	if want := "tls.trusted_roots: " + notPEM + " holds no PEM certificate"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("trusted_roots without a certificate: err = %v, want %q", err, want)
	}
}

// writeFile puts data in a fresh file named name and returns its path.
func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// selfSignedPEM is a new self-signed CA certificate, PEM-encoded.
func selfSignedPEM(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test root"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

func TestPublicBaseURL(t *testing.T) {
	tests := []struct {
		listen, publicURL, tls, want string
	}{
		{"127.0.0.1:8080", "", "", "http://127.0.0.1:8080"},
		{":9000", "", "", "http://127.0.0.1:9000"},
		{"0.0.0.0:80", "", "", "http://127.0.0.1:80"},
		{"[::]:8080", "", "", "http://127.0.0.1:8080"},
		{"[::1]:8080", "", "", "http://[::1]:8080"},
		{"localhost:8080", "", "", "http://localhost:8080"},
		{"0.0.0.0:8080", "https://blueline.example.com/", "", "https://blueline.example.com"},
		{"127.0.0.1:8080", "https://example.com/blueline/", "", "https://example.com/blueline"},
		{"127.0.0.1:8080", "http://10.0.0.5:8080", "", "http://10.0.0.5:8080"},
		// With TLS: the first domain, with https_listen's port unless 443;
		// listen plays no part, and public_url still wins.
		{"127.0.0.1:8080", "", `domains = ["Blueline.example.com", "b.example.com"]`, "https://blueline.example.com"},
		{"127.0.0.1:8080", "", `domains = ["blueline.example.com"]` + "\nhttps_listen = \"0.0.0.0:443\"", "https://blueline.example.com"},
		{"127.0.0.1:8080", "", `domains = ["blueline.example.com"]` + "\nhttps_listen = \":8443\"", "https://blueline.example.com:8443"},
		{"127.0.0.1:8080", "https://example.com/blueline", `domains = ["blueline.example.com"]`, "https://example.com/blueline"},
	}
	for _, tt := range tests {
		doc := "[server]\nlisten = \"" + tt.listen + "\"\npublic_url = \"" + tt.publicURL + "\"\n[tls]\n" + tt.tls + "\n" + oneLine
		c, err := config.Parse("test", []byte(doc))
		if err != nil {
			t.Errorf("listen %q public_url %q tls %q: %v", tt.listen, tt.publicURL, tt.tls, err)
			continue
		}
		if got := c.PublicBaseURL(); got != tt.want {
			t.Errorf("listen %q public_url %q tls %q: PublicBaseURL() = %q, want %q", tt.listen, tt.publicURL, tt.tls, got, tt.want)
		}
	}
}

// trusted_proxies takes addresses and CIDR prefixes (none by default) and
// refuses anything else, naming the entry.
func TestTrustedProxies(t *testing.T) {
	if c := mustLoad(t, oneLine); len(c.Server.Proxies()) != 0 {
		t.Errorf("default trusted proxies %v, want none", c.Server.Proxies())
	}
	c := mustLoad(t, "[server]\ntrusted_proxies = [\"127.0.0.1\", \"10.1.2.3/8\", \"::1\", \"fd00::/8\"]\n"+oneLine)
	var got []string
	for _, p := range c.Server.Proxies() {
		got = append(got, p.String())
	}
	if want := "127.0.0.1/32 10.0.0.0/8 ::1/128 fd00::/8"; strings.Join(got, " ") != want {
		t.Errorf("trusted proxies %v, want %s", got, want)
	}
	_, err := config.Parse("test", []byte("[server]\ntrusted_proxies = [\"127.0.0.1\", \"proxy.local\", \"::ffff:10.0.0.0/104\"]\n"+oneLine))
	for _, want := range []string{`server.trusted_proxies[1]: must be an IP address or a CIDR prefix`, `server.trusted_proxies[2]: `} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("bad trusted proxies: %v, want %q", err, want)
		}
	}
}

func TestDataDir(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(t.TempDir(), "data")
	tests := []struct{ dir, want string }{
		{"./blueline-data", filepath.Join(wd, "blueline-data")},
		{"data/../store", filepath.Join(wd, "store")},
		{abs, abs},
	}
	for _, tt := range tests {
		c := config.Default()
		c.Storage.Dir = tt.dir
		if got := c.DataDir(); got != tt.want {
			t.Errorf("DataDir() for %q = %q, want %q", tt.dir, got, tt.want)
		}
	}
}

func TestDurationText(t *testing.T) {
	for _, s := range []string{"0s", "250ms", "1m30s", "5m0s"} {
		var d config.Duration
		if err := d.UnmarshalText([]byte(s)); err != nil {
			t.Fatalf("UnmarshalText(%q): %v", s, err)
		}
		out, err := d.MarshalText()
		if err != nil || string(out) != s {
			t.Errorf("MarshalText after %q = %q, %v", s, out, err)
		}
	}
	var d config.Duration
	if err := d.UnmarshalText([]byte("5")); err == nil {
		t.Error(`UnmarshalText("5") succeeded; a unit is required`)
	}
}

func TestGuardDefaults(t *testing.T) {
	c := mustLoad(t, "[[lines]]\nhandle = \"+15550000001\"\n"+
		"[[lines]]\nhandle = \"+15550000002\"\nguard = true\n"+
		"[[lines]]\nhandle = \"+15550000003\"\nbridge = \"messages\"\n"+
		"[[lines]]\nhandle = \"+15550000004\"\nbridge = \"messages\"\nchat_db = \"/tmp/other.db\"\nguard = false\n"+
		"[guard]\nmax_ratio = 0\n")
	var on []bool
	for _, l := range c.Lines {
		on = append(on, l.GuardOn())
	}
	if want := []bool{false, true, true, false}; !slices.Equal(on, want) {
		t.Errorf("GuardOn = %v, want %v", on, want)
	}
	g := c.Guard
	if g.Pace.Duration != time.Second || g.MaxUnanswered != 5 || g.MaxRatio != 0 || g.MaxColdContacts != 200 || g.ColdAfter.Duration != 24*time.Hour {
		t.Errorf("[guard] = %+v", g)
	}
}

// Overrides replace the file's listen address and data folder, checked as
// the file's are; --dev is for a daemon only this machine reaches.
func TestApplyOverrides(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:0", "[::1]:8080", "localhost:8080"} {
		c := config.Default()
		if err := c.Apply(config.Overrides{Listen: addr, ListenSource: "--listen", Dev: true}); err != nil || !c.Dev ||
			!c.Webhooks.AllowHTTP || !c.Webhooks.AllowPrivateNetworks || c.Server.Listen != addr {
			t.Errorf("--dev on %s: %v, %+v %+v", addr, err, c.Server, c.Webhooks)
		}
	}
	for _, addr := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "192.168.1.2:8080", "blueline.example.com:8080"} {
		c := config.Default()
		err := c.Apply(config.Overrides{Listen: addr, ListenSource: "--listen", Dev: true})
		if err == nil || !strings.Contains(err.Error(), "--dev: is for a daemon on this machine alone") || c.Dev || c.Webhooks.AllowHTTP {
			t.Errorf("--dev on %s: %v", addr, err)
		}
	}
	c := config.Default()
	if err := c.Apply(config.Overrides{Listen: "8080", ListenSource: "BLUELINE_LISTEN", DataDir: " ", DataSource: "--data"}); err == nil ||
		!strings.Contains(err.Error(), `BLUELINE_LISTEN: must be host:port such as "127.0.0.1:8080" or ":8080", got "8080"`) ||
		!strings.Contains(err.Error(), "--data: must not be blank") || c.Server.Listen != "127.0.0.1:8080" {
		t.Errorf("bad overrides: %v", err)
	}
	if c := mustLoad(t, oneLine); c.Apply(config.Overrides{}) != nil || c.Dev || c.Webhooks.AllowHTTP {
		t.Errorf("no overrides changed %+v", c)
	}
}

// A line without keyword lists takes keyword's defaults; an empty list
// turns its keywords off; a list replaces the default whole.
func TestOptOutWords(t *testing.T) {
	c := mustLoad(t, "[[lines]]\nhandle = \"+15550000001\"\n"+
		"[[lines]]\nhandle = \"+15550000002\"\nopt_out_words = []\nopt_in_words = []\n"+
		"[[lines]]\nhandle = \"+15550000003\"\nopt_out_words = [\"Halt\", \"Arrêt\"]\nopt_out_reply = \"You will get no more messages. Text START to resume.\"\n")
	if got := c.Lines[0]; !slices.Equal(got.OptOutWords, keyword.DefaultOptOut) || !slices.Equal(got.OptInWords, keyword.DefaultOptIn) || got.OptOutReply != "" {
		t.Errorf("line without lists: %q, %q, %q", got.OptOutWords, got.OptInWords, got.OptOutReply)
	}
	if got := c.Lines[1]; got.OptOutWords == nil || len(got.OptOutWords) != 0 || len(got.OptInWords) != 0 {
		t.Errorf("line with empty lists: %#v, %#v", got.OptOutWords, got.OptInWords)
	}
	if got := c.Lines[2]; !slices.Equal(got.OptOutWords, []string{"Halt", "Arrêt"}) || !slices.Equal(got.OptInWords, keyword.DefaultOptIn) ||
		got.OptOutReply != "You will get no more messages. Text START to resume." {
		t.Errorf("line with its own list: %q, %q, %q", got.OptOutWords, got.OptInWords, got.OptOutReply)
	}
}

func TestOptOutWordsErrors(t *testing.T) {
	for doc, want := range map[string]string{
		"opt_out_words = [\"STOP\", \" \"]\n":                       "lines[0].opt_out_words: holds an empty word",
		"opt_in_words = [\"\"]\n":                                   "lines[0].opt_in_words: holds an empty word",
		"opt_out_words = [\"arrêt\"]\nopt_in_words = [\"ARRET\"]\n": `lines[0].opt_in_words: "ARRET" is an opt-out word too`,
		"opt_in_words = [\"stop\"]\n":                               `lines[0].opt_in_words: "stop" is an opt-out word too`,
		"opt_out_reply = \"  \"\n":                                  "lines[0].opt_out_reply: is only white space",
	} {
		_, err := config.Parse("test", []byte(oneLine+doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want it to contain %q", doc, err, want)
		}
	}
}

// A line's approval settings: the contacts exempt from approval are
// normalised as handles, and the takeover setting is kept.
func TestLineApprovalSettings(t *testing.T) {
	c := mustLoad(t, oneLine+"approval = \"required\"\napproval_except = [\"+1 (555) 111-0001\", \"Ann@Example.com\"]\napproval_ttl = \"30m\"\ntakeover = \"hold\"\n")
	l := c.Lines[0]
	if l.Approval != config.ApprovalRequired || l.Takeover != config.TakeoverHold || l.ApprovalTTL.Duration != 30*time.Minute ||
		!reflect.DeepEqual(l.ApprovalExcept, []string{"+15551110001", "ann@example.com"}) {
		t.Errorf("line %+v", l)
	}
}
