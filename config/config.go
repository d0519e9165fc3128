// Package config reads Blueline's TOML configuration. Unknown keys are refused
// and every value is checked when the file is loaded, so a typo stops the
// daemon at start with the file, line and key at fault instead of showing up
// later as a setting that silently did nothing.
package config

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"
)

// Config is the whole daemon configuration.
type Config struct {
	Path      string    `toml:"-"` // file it was read from; "" for the embedded default
	Server    Server    `toml:"server"`
	Storage   Storage   `toml:"storage"`
	Lines     []Line    `toml:"lines"`
	Sandbox   Sandbox   `toml:"sandbox"`
	Limits    Limits    `toml:"limits"`
	Files     Files     `toml:"files"`
	Webhooks  Webhooks  `toml:"webhooks"`
	Delivery  Delivery  `toml:"delivery"`
	Guard     Guard     `toml:"guard"`
	Sim       Sim       `toml:"sim"`
	Log       Log       `toml:"log"`
	TLS       TLS       `toml:"tls"`
	Dashboard Dashboard `toml:"dashboard"`
	Fleet     Fleet     `toml:"fleet"`

	// DefaultLines is whether the lines and the sandbox are the embedded
	// default's because the file has neither [[lines]] nor [sandbox].
	DefaultLines bool `toml:"-"`
	// Dev is `serve --dev`: webhook receivers on http:// and on this
	// machine's networks are allowed (Apply sets the [webhooks] settings
	// that say so), and the daemon says so at start and on the console.
	Dev bool `toml:"-"`
}

// Fleet makes this host one node of several serving one API, over NATS
// JetStream: an embedded NATS server clustered with the other nodes'
// (listen, cluster, routes), or an existing NATS reached at URL. With every
// setting at its default the fleet is off and nothing of it is started; On
// reports which. The fleet package does the work; daemon hands it these
// values.
type Fleet struct {
	// Node is this host's name in the fleet: unique, and stable forever
	// (it is the JetStream peer's identity).
	Node string `toml:"node"`
	// Listen is the embedded server's client port, on loopback only: other
	// hosts come in through the cluster port. Port 0 takes a free port.
	Listen string `toml:"listen"`
	// Cluster is where the embedded server accepts routes from the other
	// nodes, host:port; "" runs it alone (a fleet of one host). Port 0
	// takes a free port (tests only: the others must know it).
	Cluster string `toml:"cluster"`
	// Routes are the other nodes' cluster ports, as nats://host:port (this
	// node's own may be listed too, so every node can share one list).
	Routes []string `toml:"routes"`
	// Secret is shared by the fleet: the embedded server's clients and
	// routes authenticate with passwords derived from it.
	Secret string `toml:"secret"`
	// URL is an existing NATS with JetStream to use instead of an embedded
	// server: "nats://user:pass@host:4222" (several comma-separated).
	URL string `toml:"url"`
	// TLSCert, TLSKey and TLSCA are PEM files: this node's certificate and
	// key, and the fleet's CA, for mutual TLS on the routes (or, with URL,
	// towards that NATS).
	TLSCert string `toml:"tls_cert"`
	TLSKey  string `toml:"tls_key"`
	TLSCA   string `toml:"tls_ca"`
}

// On reports whether this host is a node of a fleet.
func (f Fleet) On() bool { return f.Node != "" }

// Embedded reports whether the node runs its own NATS server (rather than
// connecting to URL).
func (f Fleet) Embedded() bool { return f.On() && f.URL == "" }

// TLSFiles reports whether tls_cert, tls_key and tls_ca are set (check
// refuses one without the others).
func (f Fleet) TLSFiles() bool { return f.TLSCert != "" && f.TLSKey != "" && f.TLSCA != "" }

// Fleet route TLS sources, as FleetRouteTLS reports them.
const (
	FleetTLSNone  = ""      // plain TCP: loopback routes only
	FleetTLSFiles = "files" // [fleet] tls_cert, tls_key and tls_ca
	FleetTLSACME  = "acme"  // the [tls] section's ACME certificates
)

// FleetRouteTLS says where the routes' TLS certificates come from: the
// fleet's own files first, else the [tls] section's certificates when it is
// on, else none.
func (c *Config) FleetRouteTLS() string {
	switch {
	case c.Fleet.TLSFiles():
		return FleetTLSFiles
	case c.TLS.Enabled():
		return FleetTLSACME
	}
	return FleetTLSNone
}

// FleetStoreDir is the folder of the embedded server's JetStream store: a
// folder of its own in the data folder, never shared with anything else.
func (c *Config) FleetStoreDir() string { return filepath.Join(c.DataDir(), "fleet") }

// Dashboard is the web console served under /dashboard/ on the API
// listener.
type Dashboard struct {
	// Enabled is a pointer because the default is true.
	Enabled *bool `toml:"enabled"`
	// SessionTTL is how long a sign-in lasts.
	SessionTTL Duration `toml:"session_ttl"`
}

// On reports whether the dashboard is served.
func (d Dashboard) On() bool { return d.Enabled == nil || *d.Enabled }

// Server is where the HTTP API listens and how it is reached from outside.
type Server struct {
	// Listen is a host:port for the API; an empty host means all interfaces.
	Listen string `toml:"listen"`
	// PublicURL is the base URL clients use (behind a reverse proxy it
	// differs from Listen); "" means PublicBaseURL derives it from Listen.
	PublicURL string `toml:"public_url"`
	// TrustedProxies are the addresses (CIDR prefixes or single IPs) of
	// reverse proxies whose X-Forwarded-For and Forwarded headers are
	// believed; none by default. See Proxies.
	TrustedProxies []string `toml:"trusted_proxies"`

	// ListenFrom names what set Listen when it is not the file ("--listen",
	// "BLUELINE_LISTEN"), for errors that tell where to change it.
	ListenFrom string `toml:"-"`
}

// ListenSetting is where Listen is set, as an error tells to change it.
func (s Server) ListenSetting() string {
	if s.ListenFrom != "" {
		return s.ListenFrom
	}
	return "[server] listen"
}

// Proxies is TrustedProxies parsed (check has refused any that does not
// parse), a single IP as the prefix of that address alone.
func (s Server) Proxies() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range s.TrustedProxies {
		if pr, err := parseProxy(p); err == nil {
			out = append(out, pr)
		}
	}
	return out
}

func parseProxy(s string) (netip.Prefix, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	if p.Addr().Is4In6() {
		// Connections' addresses are compared unmapped: an IPv4-mapped
		// prefix would match none.
		return netip.Prefix{}, errors.New("an IPv4-mapped IPv6 prefix: write it as an IPv4 prefix")
	}
	return p.Masked(), nil
}

// TLS serves the API over HTTPS with certificates obtained and renewed
// automatically from an ACME certificate authority (Let's Encrypt by
// default). With no domains it is off and the API is plain HTTP on
// Server.Listen.
type TLS struct {
	// Domains are the names certificates are obtained for, already checked
	// and lower-cased; the first one makes the default public URL.
	Domains []string `toml:"domains"`
	Email   string   `toml:"email"` // the ACME account's contact, optional
	// CA is "production", "staging" or the https:// directory URL of
	// another ACME CA; DirectoryURL resolves it.
	CA          string `toml:"ca"`
	HTTPListen  string `toml:"http_listen"`  // HTTP-01 challenges, and redirects to HTTPS
	HTTPSListen string `toml:"https_listen"` // the API over HTTPS
	// TrustedRoots is a PEM file of roots to trust, besides the system's,
	// for the ACME CA's own HTTPS (a private CA); "" for none.
	TrustedRoots string `toml:"trusted_roots"`

	// RenewCheck is not a setting: how often certificates are checked for
	// renewal. Zero takes certmagic's default, 10 minutes; tests shorten it
	// to watch a renewal happen.
	RenewCheck Duration `toml:"-"`
}

// Enabled reports whether the API is served over HTTPS.
func (t TLS) Enabled() bool { return len(t.Domains) > 0 }

// ACME directories of Let's Encrypt, which ca = "production" and "staging"
// name.
const (
	LetsEncryptProduction = "https://acme-v02.api.letsencrypt.org/directory"
	LetsEncryptStaging    = "https://acme-staging-v02.api.letsencrypt.org/directory"
)

// DirectoryURL returns the ACME directory URL that CA names.
func (t TLS) DirectoryURL() string {
	switch t.CA {
	case "", "production":
		return LetsEncryptProduction
	case "staging":
		return LetsEncryptStaging
	}
	return t.CA
}

// Storage is where the daemon keeps its database and files.
type Storage struct {
	// Dir is kept as written, relative to the daemon's working directory;
	// use Config.DataDir for the absolute form.
	Dir string `toml:"dir"`
}

// Line is one phone number or account the daemon sends and receives through.
type Line struct {
	Handle           string `toml:"handle"`  // normalised by handle.Normalize
	Label            string `toml:"label"`   // shown to people, optional
	Bridge           string `toml:"bridge"`  // "sim" or "messages"
	Service          string `toml:"service"` // "imessage" or "sms"
	AdvancedFeatures bool   `toml:"advanced_features"`
	// Guard turns the Apple ID guard ([guard]) on or off for the line;
	// nil is the default: on for bridge = "messages", off on "sim".
	Guard *bool `toml:"guard"`
	// OptOutWords and OptInWords are the messages (whole, case and
	// accents folded: package keyword) that opt a contact out of the
	// line's messages and back in; nil is keyword's default lists, an empty
	// list none. OptOutReply, when set, is sent once to a contact who opts
	// out.
	OptOutWords []string `toml:"opt_out_words"`
	OptInWords  []string `toml:"opt_in_words"`
	OptOutReply string   `toml:"opt_out_reply"`
	// TakeoverQuiet is how long a chat stays the owner's after the owner
	// writes in it from another device: agent keys may not write to it
	// until then.
	TakeoverQuiet Duration `toml:"takeover_quiet"`
	// SelfHandles are the handles of the owner's Apple ID (phone number,
	// e-mail addresses): a one-to-one chat with one of them is the owner's
	// chat with themselves, whose messages are message.self events. Empty
	// is the line's handle alone.
	SelfHandles []string `toml:"self_handles"`
	// Takeover is what becomes of an agent key's message to a chat the
	// owner took over: "refuse" (409 human_active, the default) or "hold"
	// (a draft waiting for the owner's approval).
	Takeover string `toml:"takeover"`
	// Approval is "required" when agent keys' messages wait for the
	// owner's approval ("" or "none": they do not), except those to chats
	// whose every contact is in ApprovalExcept; a draft expires
	// ApprovalTTL after it is accepted.
	Approval       string   `toml:"approval"`
	ApprovalExcept []string `toml:"approval_except"`
	ApprovalTTL    Duration `toml:"approval_ttl"`

	// The Messages bridge only (bridge = "messages"); "~" means the home
	// folder of the user the daemon runs as.
	ChatDB         string `toml:"chat_db"`         // the Messages database
	Osascript      string `toml:"osascript"`       // the program that runs AppleScript
	AttachmentsDir string `toml:"attachments_dir"` // where files are staged for Messages to send
	HelperPort     int    `toml:"helper_port"`     // loopback port the private-API helper connects to; 0: 45670 + uid - 501
	// Watch is whether to watch chat.db's folder for changes (true, the
	// default) or only read it every Poll.
	Watch *bool `toml:"watch"`
	// Poll is how often chat.db is read whatever the change notices say.
	Poll Duration `toml:"poll"`
	// MacOSVersion overrides the Mac's macOS version ("26.1"), which
	// decides the features that need a recent one; "" reads this Mac's.
	MacOSVersion string `toml:"macos_version"`
	// Watchdog is whether Messages is pinged at the start and while idle
	// (true, the default), every PingEvery without a script.
	Watchdog  *bool    `toml:"watchdog"`
	PingEvery Duration `toml:"ping_every"`
	// TransferWait is how long a new message waits for its attachments to
	// finish transferring before it is reported without them (they are
	// filled in when they arrive).
	TransferWait Duration `toml:"transfer_wait"`
	// SMSFallback sends a one-to-one iMessage that cannot reach its
	// recipient once more as SMS (off by default).
	SMSFallback bool `toml:"sms_fallback"`
	// UnknownSenders is what becomes of messages from senders Messages
	// files under Unknown Senders (or holds for review): "deliver" (the
	// default) or "hold" (stored without events; the line may not answer).
	UnknownSenders string `toml:"unknown_senders"`
	// SendTimeout bounds each AppleScript run and the wait for a sent text
	// to show as sent; FileSendTimeout the wait for a sent file.
	SendTimeout     Duration `toml:"send_timeout"`
	FileSendTimeout Duration `toml:"file_send_timeout"`
}

// GuardOn reports whether the Apple ID guard protects the line.
func (l Line) GuardOn() bool {
	if l.Guard != nil {
		return *l.Guard
	}
	return l.Bridge == "messages"
}

// DefaultFleetListen is the embedded NATS server's client port.
const DefaultFleetListen = "127.0.0.1:4222"

// Defaults of the Messages bridge's settings.
const (
	DefaultChatDB         = "~/Library/Messages/chat.db"
	DefaultPingEvery      = 5 * time.Minute
	DefaultOsascript      = "/usr/bin/osascript"
	DefaultAttachmentsDir = "~/Library/Messages/Attachments/blueline"
	DefaultSendTimeout    = 30 * time.Second
	DefaultFileTimeout    = 3 * time.Minute
	DefaultPoll           = time.Second
	DefaultTransferWait   = 2 * time.Minute
	DefaultTakeoverQuiet  = 20 * time.Minute
	DefaultApprovalTTL    = time.Hour
)

// Sandbox is the shared line every API key can reach for trying things out.
type Sandbox struct {
	Handle     string `toml:"handle"` // "" disables the sandbox line
	Label      string `toml:"label"`
	DailyQuota int    `toml:"daily_quota"` // sends per UTC day
	// AdvancedFeatures is a pointer because the default is true, and a
	// plain bool cannot tell "absent" from an explicit false.
	AdvancedFeatures *bool `toml:"advanced_features"`
}

// Advanced reports whether the sandbox line has advanced features.
func (s Sandbox) Advanced() bool {
	return s.AdvancedFeatures == nil || *s.AdvancedFeatures
}

// Limits protect the daemon from clients that misbehave.
type Limits struct {
	RequestsPerHour int   `toml:"requests_per_hour"` // per API key; 0 disables the limit
	MaxBodyBytes    int64 `toml:"max_body_bytes"`    // largest JSON request body
	// MaxConnections caps the API's open connections (each of the HTTPS
	// and HTTP listeners with TLS); more wait to be accepted.
	MaxConnections int `toml:"max_connections"`
	// BodyIdleTimeout cuts off a request body (an upload too) from which
	// nothing arrives for this long.
	BodyIdleTimeout Duration `toml:"body_idle_timeout"`
	// StreamsPerKey caps the event streams (GET /v1/events) one API key
	// holds open at once, and the console's live streams per session.
	StreamsPerKey int `toml:"streams_per_key"`
	// StreamLifetime is how long a stream lasts before the daemon ends
	// it and its client resumes.
	StreamLifetime Duration `toml:"stream_lifetime"`
}

// Files limits uploads and the download URLs handed out for them.
type Files struct {
	MaxUploadBytes int64    `toml:"max_upload_bytes"` // largest upload
	URLTTL         Duration `toml:"url_ttl"`          // how long a signed download URL works
}

// Webhooks tunes the delivery of webhook events.
type Webhooks struct {
	AllowHTTP            bool       `toml:"allow_http"`             // accept http:// receiver URLs
	AllowPrivateNetworks bool       `toml:"allow_private_networks"` // accept receivers on loopback and private addresses
	Timeout              Duration   `toml:"timeout"`                // for a receiver to answer
	RetrySchedule        []Duration `toml:"retry_schedule"`         // waits before each retry
	DisableAfter         Duration   `toml:"disable_after"`          // failing this long makes a webhook inactive
	Concurrency          int        `toml:"concurrency"`            // deliveries under way per webhook
	CAFile               string     `toml:"ca_file"`                // extra trusted roots for receivers, PEM
	Retention            Duration   `toml:"retention"`              // how long delivery records are kept
}

// Schedule is RetrySchedule as the dispatcher takes it.
func (w Webhooks) Schedule() []time.Duration {
	out := make([]time.Duration, len(w.RetrySchedule))
	for i, d := range w.RetrySchedule {
		out[i] = d.Duration
	}
	return out
}

// Delivery tunes the workers that hand outgoing messages to the bridges.
type Delivery struct {
	MaxAttempts int      `toml:"max_attempts"`
	Workers     int      `toml:"workers"`
	RetryBase   Duration `toml:"retry_base"` // first retry delay, doubled each attempt
	RetryMax    Duration `toml:"retry_max"`  // cap on the retry delay
}

// Guard is the Apple ID guard's policy, for the lines it protects (see
// Line.GuardOn): the pace of their messages, and caps on what they accept.
// A cap of 0 is no cap.
type Guard struct {
	Pace            Duration `toml:"pace"`              // at most one message per line per pace; "0s" for no pacing
	MaxUnanswered   int      `toml:"max_unanswered"`    // messages to a chat since its contact last wrote
	MaxRatio        int      `toml:"max_ratio"`         // a UTC day's messages per message received (at least one)
	MaxColdContacts int      `toml:"max_cold_contacts"` // cold chats messaged per UTC day
	ColdAfter       Duration `toml:"cold_after"`        // silence after which a contact is cold
	// MaxAvailabilityLookups caps the availability lookups that reach a
	// line's network per hour (Apple's directory, on a Mac).
	MaxAvailabilityLookups int `toml:"max_availability_lookups"`
}

// Sim tunes the offline simulated network.
type Sim struct {
	Latency Duration `toml:"latency"` // how long a simulated send takes
}

// Log chooses what the daemon logs and how.
type Log struct {
	Level  string `toml:"level"`  // "debug", "info", "warn" or "error"
	Format string `toml:"format"` // "text" or "json"
}

// Duration is a time.Duration written in TOML as a Go duration string ("1s",
// "250ms", "5m"); TOML has no duration type of its own.
type Duration struct{ time.Duration }

// UnmarshalText parses a Go duration string.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		shown := strconv.Quote(string(text))
		if _, err := strconv.ParseFloat(string(text), 64); err == nil {
			// go-toml hands bare TOML integers to TextUnmarshalers too;
			// show it unquoted, as it was written.
			shown = string(text)
		}
		return &durationError{text: shown}
	}
	d.Duration = v
	return nil
}

// durationError is a value that is not a Go duration string.
type durationError struct{ text string }

func (e *durationError) Error() string {
	return fmt.Sprintf("invalid duration %s: write a quoted number with a unit, such as \"250ms\", \"1s\" or \"5m\"", e.text)
}

// MarshalText writes the duration in the form UnmarshalText reads.
func (d Duration) MarshalText() ([]byte, error) {
	return []byte(d.Duration.String()), nil
}

// defaultTOML is the configuration used when no file is given.
//
//go:embed default.toml
var defaultTOML []byte

// defaultName names the embedded configuration in error messages.
const defaultName = "(embedded default)"

// Default returns the embedded default configuration: a sandbox line and one
// simulated line, listening on 127.0.0.1:8080. Each call returns a fresh copy
// the caller may change.
func Default() *Config {
	c, err := Parse(defaultName, defaultTOML)
	if err != nil {
		// default.toml ships inside the binary, so this is a build mistake
		// that the package tests catch, never a user error.
		panic(err)
	}
	return c
}

// Load reads, decodes and checks the configuration file at path.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		// The error names the file, which fileError already does.
		msg := err.Error()
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			msg = "cannot read it: " + pe.Err.Error()
		}
		return nil, &fileError{file: path, msg: msg, err: err}
	}
	c, err := Parse(path, data)
	if err != nil {
		return nil, err
	}
	c.Path = path
	return c, nil
}

// Parse decodes and checks a configuration document; name identifies it in
// error messages. Settings the document leaves out take their defaults, and
// handles are stored in their normalised form. Path is left empty: Parse
// cannot know whether name is a file.
func Parse(name string, data []byte) (*Config, error) {
	c := defaults()
	// Decoding over the defaults is what lets an absent key keep its default
	// while an explicit zero (requests_per_hour = 0) still counts.
	dec := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields()
	if err := dec.Decode(c); err != nil {
		return nil, decodeError(name, data, err)
	}
	if name != defaultName {
		// A file says what differs from the default: without a word of
		// lines or sandbox, it keeps the default's. Naming either replaces
		// both, so that a file's lines are all the lines there are.
		var top map[string]any
		if err := toml.Unmarshal(data, &top); err == nil && top["lines"] == nil && top["sandbox"] == nil {
			d := Default()
			c.Lines, c.Sandbox, c.DefaultLines = d.Lines, d.Sandbox, true
		}
	}
	if err := c.check(name); err != nil {
		return nil, err
	}
	return c, nil
}

// defaults holds the value of every setting a document may leave out. Lines
// are not here: their per-line defaults are filled in by check.
func defaults() *Config {
	return &Config{
		Server:  Server{Listen: "127.0.0.1:8080"},
		Storage: Storage{Dir: "./blueline-data"},
		Sandbox: Sandbox{Label: "Sandbox", DailyQuota: 50},
		Limits: Limits{RequestsPerHour: 1000, MaxBodyBytes: 1 << 20, MaxConnections: 1024, BodyIdleTimeout: Duration{30 * time.Second},
			StreamsPerKey: 4, StreamLifetime: Duration{time.Hour}},
		Files: Files{MaxUploadBytes: 100 << 20, URLTTL: Duration{time.Hour}},
		Webhooks: Webhooks{
			Timeout: Duration{15 * time.Second},
			RetrySchedule: []Duration{
				{5 * time.Second}, {30 * time.Second}, {2 * time.Minute}, {10 * time.Minute}, {30 * time.Minute},
				{time.Hour}, {3 * time.Hour}, {6 * time.Hour}, {12 * time.Hour}, {24 * time.Hour}, {24 * time.Hour},
			},
			DisableAfter: Duration{72 * time.Hour},
			Concurrency:  4,
			Retention:    Duration{7 * 24 * time.Hour},
		},
		Delivery: Delivery{
			MaxAttempts: 5,
			Workers:     4,
			RetryBase:   Duration{time.Second},
			RetryMax:    Duration{5 * time.Minute},
		},
		Guard: Guard{Pace: Duration{time.Second}, MaxUnanswered: 5, MaxRatio: 10, MaxColdContacts: 200,
			ColdAfter: Duration{24 * time.Hour}, MaxAvailabilityLookups: 60},
		Log:       Log{Level: "info", Format: "text"},
		TLS:       TLS{CA: "production", HTTPListen: ":80", HTTPSListen: ":443"},
		Dashboard: Dashboard{SessionTTL: Duration{12 * time.Hour}},
		Fleet:     Fleet{Listen: DefaultFleetListen},
	}
}

// DataDir returns the absolute form of Storage.Dir, so that the data folder
// stays the same if the process later changes its working directory.
func (c *Config) DataDir() string {
	abs, err := filepath.Abs(c.Storage.Dir)
	if err != nil {
		return filepath.Clean(c.Storage.Dir)
	}
	return abs
}

// PublicBaseURL returns the URL clients reach the API at, without a trailing
// slash: public_url when set; else, with TLS, "https://" and the first
// domain (with https_listen's port unless it is 443); else one built from
// listen. A wildcard listen host is not an address anyone can connect to,
// so 127.0.0.1 stands in for it. With port 0 the real port is only known
// once the daemon listens.
func (c *Config) PublicBaseURL() string {
	if c.Server.PublicURL != "" {
		return strings.TrimRight(c.Server.PublicURL, "/")
	}
	if c.TLS.Enabled() {
		host := c.TLS.Domains[0]
		if _, port, err := net.SplitHostPort(c.TLS.HTTPSListen); err == nil && port != "443" {
			host = net.JoinHostPort(host, port)
		}
		return "https://" + host
	}
	host, port, err := net.SplitHostPort(c.Server.Listen)
	if err != nil {
		return "http://" + c.Server.Listen
	}
	if host == "" || net.ParseIP(host).IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, port)
}
