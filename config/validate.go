package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/keyword"
)

// checker collects every problem rather than stopping at the first, so that
// one edit of the file can fix them all.
type checker struct {
	file string
	errs []error
}

func (k *checker) fail(key string, err error) {
	k.errs = append(k.errs, &fileError{file: k.file, key: key, err: err})
}

func (k *checker) failf(key, format string, args ...any) {
	k.fail(key, fmt.Errorf(format, args...))
}

// check fills in per-line defaults, normalises handles in place and reports
// every invalid value, naming it by its key path.
func (c *Config) check(file string) error {
	k := &checker{file: file}
	c.checkServer(k)
	if strings.TrimSpace(c.Storage.Dir) == "" {
		k.failf("storage.dir", "must not be empty")
	}
	c.checkLines(k)
	c.checkLimits(k)
	c.checkGuard(k)
	if c.Sim.Latency.Duration < 0 {
		k.failf("sim.latency", "must not be negative, got %s", c.Sim.Latency)
	}
	oneOf(k, "log.level", c.Log.Level, "debug", "info", "warn", "error")
	oneOf(k, "log.format", c.Log.Format, "text", "json")
	c.checkTLS(k)
	c.checkFleet(k)
	if d := c.Dashboard.SessionTTL.Duration; d < 5*time.Minute || d > 30*24*time.Hour {
		k.failf("dashboard.session_ttl", "must be from 5m to 720h (30 days), got %s", c.Dashboard.SessionTTL)
	}
	return errors.Join(k.errs...)
}

func (c *Config) checkServer(k *checker) {
	checkListen(k, "server.listen", c.Server.Listen, "127.0.0.1:8080")
	for i, p := range c.Server.TrustedProxies {
		if _, err := parseProxy(p); err != nil {
			k.failf(fmt.Sprintf("server.trusted_proxies[%d]", i), "must be an IP address or a CIDR prefix such as \"127.0.0.1/32\", got %q: %v", p, err)
		}
	}

	pub := c.Server.PublicURL
	if pub == "" {
		return
	}
	// Clients append API paths to this URL, which a query or fragment would
	// swallow.
	if strings.ContainsAny(pub, "?#") {
		k.failf("server.public_url", "must not have a query or fragment, got %q", pub)
		return
	}
	u, err := url.Parse(pub)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		k.failf("server.public_url", "must be an absolute http:// or https:// URL, got %q", pub)
		return
	}
	c.Server.PublicURL = strings.TrimRight(pub, "/")
}

// checkListen reports addr unless it is host:port with a valid port;
// example is shown in the message.
func checkListen(k *checker, key, addr, example string) bool {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		_, p, _ := net.SplitHostPort(example)
		k.failf(key, "must be host:port such as %q or %q, got %q", example, ":"+p, addr)
		return false
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		k.failf(key, "port must be a number from 0 to 65535, got %q", port)
		return false
	}
	return true
}

// checkTLS lower-cases the domains and checks the [tls] table. Without
// domains TLS is off, so any other setting changed from its default would
// silently do nothing: that is refused.
func (c *Config) checkTLS(k *checker) {
	t := &c.TLS
	if !t.Enabled() {
		def := defaults().TLS
		changed := []struct {
			name string
			set  bool
		}{
			{"email", t.Email != def.Email}, {"ca", t.CA != def.CA}, {"http_listen", t.HTTPListen != def.HTTPListen},
			{"https_listen", t.HTTPSListen != def.HTTPSListen}, {"trusted_roots", t.TrustedRoots != def.TrustedRoots},
		}
		for _, s := range changed {
			if s.set {
				k.failf("tls."+s.name, "is set but tls.domains is empty, so TLS is off: list the domains to serve")
			}
		}
		return
	}
	seen := map[string]int{}
	for i := range t.Domains {
		key := fmt.Sprintf("tls.domains[%d]", i)
		d := strings.ToLower(strings.TrimSpace(t.Domains[i]))
		t.Domains[i] = d
		if err := checkDomain(d); err != nil {
			k.fail(key, err)
			continue
		}
		if first, ok := seen[d]; ok {
			k.failf(key, "%q is already listed as tls.domains[%d]", d, first)
			continue
		}
		seen[d] = i
	}
	if e := t.Email; e != "" {
		local, host, ok := strings.Cut(e, "@")
		if !ok || local == "" || host == "" || strings.Contains(host, "@") || strings.ContainsFunc(e, unicode.IsSpace) {
			k.failf("tls.email", "must be an e-mail address such as \"admin@example.com\", got %q", e)
		}
	}
	if t.CA != "production" && t.CA != "staging" {
		u, err := url.Parse(t.CA)
		if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil {
			k.failf("tls.ca", "must be \"production\", \"staging\" or the https:// directory URL of an ACME CA, got %q", t.CA)
		}
	}
	okHTTP := checkListen(k, "tls.http_listen", t.HTTPListen, "0.0.0.0:80")
	okHTTPS := checkListen(k, "tls.https_listen", t.HTTPSListen, "0.0.0.0:443")
	if okHTTP && okHTTPS && t.HTTPListen == t.HTTPSListen && !strings.HasSuffix(t.HTTPListen, ":0") {
		k.failf("tls.https_listen", "must differ from tls.http_listen, got %q for both", t.HTTPSListen)
	}
	if t.TrustedRoots != "" {
		if _, err := loadCertPool(t.TrustedRoots); err != nil {
			k.fail("tls.trusted_roots", err)
		}
	}
}

// checkDomain reports why d, lower-cased, cannot have a certificate from an
// ACME CA answering the HTTP-01 challenge.
func checkDomain(d string) error {
	switch {
	case d == "":
		return errors.New("must not be empty")
	case strings.Contains(d, "*"):
		return fmt.Errorf("%q is a wildcard: wildcard certificates need the DNS-01 challenge, which Blueline does not do; list each name instead", d)
	case net.ParseIP(strings.Trim(d, "[]")) != nil:
		return fmt.Errorf("%q is an IP address: certificates are obtained for domain names only", d)
	case strings.ContainsAny(d, ":/"):
		return fmt.Errorf("%q must be a domain name alone, without scheme, port or path", d)
	case len(d) > 253:
		return fmt.Errorf("%q is longer than 253 characters", d)
	}
	for _, label := range strings.Split(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' ||
			strings.ContainsFunc(label, func(r rune) bool { return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') }) {
			return fmt.Errorf("%q is not a domain name: labels of letters, digits and inner hyphens separated by single dots (write an internationalised name in its xn-- form)", d)
		}
	}
	return nil
}

func (c *Config) checkLines(k *checker) {
	// owner maps each normalised handle to the key that claimed it first,
	// so a duplicate names both places.
	owner := make(map[string]string)
	claim := func(key, raw string) string {
		h, err := handle.Normalize(raw)
		if err != nil {
			k.fail(key, fmt.Errorf("%q is %w", raw, err))
			return raw
		}
		if first, ok := owner[h]; ok {
			k.failf(key, "%q is already used by %s", h, strings.TrimSuffix(first, ".handle"))
			return h
		}
		owner[h] = key
		return h
	}

	chatDBs := map[string]string{} // a Messages database serves one line
	for i := range c.Lines {
		l := &c.Lines[i]
		key := fmt.Sprintf("lines[%d]", i)
		if strings.TrimSpace(l.Handle) == "" {
			k.failf(key+".handle", "is required")
		} else {
			l.Handle = claim(key+".handle", l.Handle)
		}
		if l.Bridge == "" {
			l.Bridge = "sim"
		}
		if l.Service == "" {
			l.Service = "imessage"
		}
		switch d := l.TakeoverQuiet.Duration; {
		case d == 0:
			l.TakeoverQuiet.Duration = DefaultTakeoverQuiet
		case d < time.Minute || d > 24*time.Hour:
			k.failf(key+".takeover_quiet", "must be from 1m to 24h, got %s", d)
		}
		checkSelfHandles(k, key, l)
		checkApproval(k, key, l)
		oneOf(k, key+".bridge", l.Bridge, "sim", "messages")
		oneOf(k, key+".service", l.Service, "imessage", "sms")
		checkMessagesLine(k, key, l, chatDBs)
		checkKeywords(k, key, l)
	}

	s := &c.Sandbox
	if s.Handle != "" {
		s.Handle = claim("sandbox.handle", s.Handle)
	}
	if s.DailyQuota < 1 {
		k.failf("sandbox.daily_quota", "must be at least 1, got %d", s.DailyQuota)
	}

	if len(c.Lines) == 0 && s.Handle == "" {
		k.failf("lines", "no lines configured: add a [[lines]] table or set sandbox.handle")
	}
}

// checkSelfHandles normalises the owner's own handles, the line's handle
// when none are listed.
func checkSelfHandles(k *checker, key string, l *Line) {
	if len(l.SelfHandles) == 0 {
		l.SelfHandles = []string{l.Handle}
		return
	}
	for i, raw := range l.SelfHandles {
		h, err := handle.Normalize(raw)
		if err != nil {
			k.fail(fmt.Sprintf("%s.self_handles[%d]", key, i), fmt.Errorf("%q is %w", raw, err))
			continue
		}
		l.SelfHandles[i] = h
	}
}

// Approval settings: what approval and takeover may say, and how long a
// draft may wait.
const (
	ApprovalRequired = "required"
	ApprovalNone     = "none"
	TakeoverRefuse   = "refuse"
	TakeoverHold     = "hold"
	MinApprovalTTL   = time.Minute
	MaxApprovalTTL   = 7 * 24 * time.Hour
)

// checkApproval fills in the approval defaults and normalises the
// contacts exempt from it.
func checkApproval(k *checker, key string, l *Line) {
	if l.Takeover == "" {
		l.Takeover = TakeoverRefuse
	}
	oneOf(k, key+".takeover", l.Takeover, TakeoverRefuse, TakeoverHold)
	if l.Approval == "" {
		l.Approval = ApprovalNone
	}
	oneOf(k, key+".approval", l.Approval, ApprovalNone, ApprovalRequired)
	switch d := l.ApprovalTTL.Duration; {
	case d == 0:
		l.ApprovalTTL.Duration = DefaultApprovalTTL
	case d < MinApprovalTTL || d > MaxApprovalTTL:
		k.failf(key+".approval_ttl", "must be from 1m to 168h (7 days), got %s", d)
	}
	if len(l.ApprovalExcept) > 0 && l.Approval != ApprovalRequired {
		k.failf(key+".approval_except", "lists contacts exempt from approval, but approval is not \"required\"")
	}
	for i, raw := range l.ApprovalExcept {
		h, err := handle.Normalize(raw)
		if err != nil {
			k.failf(fmt.Sprintf("%s.approval_except[%d]", key, i), "%q is not a phone number or e-mail address: %v", raw, err)
			continue
		}
		l.ApprovalExcept[i] = h
	}
}

// checkKeywords fills in the default opt-out and opt-in words and refuses
// a word that folds to nothing or is in both lists.
func checkKeywords(k *checker, key string, l *Line) {
	if l.OptOutWords == nil {
		l.OptOutWords = slices.Clone(keyword.DefaultOptOut)
	}
	if l.OptInWords == nil {
		l.OptInWords = slices.Clone(keyword.DefaultOptIn)
	}
	optOut := map[string]bool{}
	for _, w := range l.OptOutWords {
		if keyword.Fold(w) == "" {
			k.failf(key+".opt_out_words", "holds an empty word")
		}
		optOut[keyword.Fold(w)] = true
	}
	for _, w := range l.OptInWords {
		switch {
		case keyword.Fold(w) == "":
			k.failf(key+".opt_in_words", "holds an empty word")
		case optOut[keyword.Fold(w)]:
			k.failf(key+".opt_in_words", "%q is an opt-out word too (words are compared with case and accents folded)", w)
		}
	}
	if l.OptOutReply != "" && strings.TrimSpace(l.OptOutReply) == "" {
		k.failf(key+".opt_out_reply", "is only white space: leave it out to send no reply")
	}
}

var macOSVersionPattern = regexp.MustCompile(`^[0-9]{2}(\.[0-9]+){0,2}$`)

// checkMessagesLine fills in the Messages bridge's defaults, and refuses its
// settings on other bridges, where they would silently do nothing.
func checkMessagesLine(k *checker, key string, l *Line, chatDBs map[string]string) {
	if l.Bridge != "messages" {
		for name, set := range map[string]bool{"chat_db": l.ChatDB != "", "osascript": l.Osascript != "",
			"attachments_dir": l.AttachmentsDir != "", "helper_port": l.HelperPort != 0, "watch": l.Watch != nil,
			"sms_fallback": l.SMSFallback, "send_timeout": l.SendTimeout.Duration != 0, "file_send_timeout": l.FileSendTimeout.Duration != 0,
			"poll": l.Poll.Duration != 0, "transfer_wait": l.TransferWait.Duration != 0, "unknown_senders": l.UnknownSenders != "",
			"watchdog": l.Watchdog != nil, "ping_every": l.PingEvery.Duration != 0, "macos_version": l.MacOSVersion != ""} {
			if set {
				k.failf(key+"."+name, "is a setting of bridge = \"messages\" only")
			}
		}
		return
	}
	switch l.UnknownSenders {
	case "":
		l.UnknownSenders = "deliver"
	case "deliver", "hold":
	default:
		k.failf(key+".unknown_senders", `must be "deliver" or "hold", got %q`, l.UnknownSenders)
	}
	if l.ChatDB == "" {
		l.ChatDB = DefaultChatDB
	}
	if l.Osascript == "" {
		l.Osascript = DefaultOsascript
	}
	if l.AttachmentsDir == "" {
		l.AttachmentsDir = DefaultAttachmentsDir
	}
	if l.Watch == nil {
		watch := true
		l.Watch = &watch
	}
	for name, d := range map[string]*Duration{"send_timeout": &l.SendTimeout, "file_send_timeout": &l.FileSendTimeout,
		"transfer_wait": &l.TransferWait} {
		switch {
		case d.Duration < 0 || (d.Duration != 0 && d.Duration < time.Second):
			k.failf(key+"."+name, "must be at least 1s, got %s", d.Duration)
		case d.Duration > time.Hour:
			k.failf(key+"."+name, "must be at most 1h, got %s", d.Duration)
		}
	}
	switch d := l.Poll.Duration; {
	case d < 0 || (d != 0 && d < 100*time.Millisecond):
		k.failf(key+".poll", "must be at least 100ms, got %s", d)
	case d > time.Hour:
		k.failf(key+".poll", "must be at most 1h, got %s", d)
	case d == 0:
		l.Poll.Duration = DefaultPoll
	}
	if l.MacOSVersion != "" && !macOSVersionPattern.MatchString(l.MacOSVersion) {
		k.failf(key+".macos_version", `must be a macOS version such as "15.6" or "26.1", got %q`, l.MacOSVersion)
	}
	if l.Watchdog == nil {
		on := true
		l.Watchdog = &on
	}
	switch d := l.PingEvery.Duration; {
	case d < 0 || (d != 0 && d < 100*time.Millisecond):
		k.failf(key+".ping_every", "must be at least 100ms, got %s", d)
	case d > 24*time.Hour:
		k.failf(key+".ping_every", "must be at most 24h, got %s", d)
	case d == 0:
		l.PingEvery.Duration = DefaultPingEvery
	}
	if l.TransferWait.Duration == 0 {
		l.TransferWait.Duration = DefaultTransferWait
	}
	if l.SendTimeout.Duration == 0 {
		l.SendTimeout.Duration = DefaultSendTimeout
	}
	if l.FileSendTimeout.Duration == 0 {
		l.FileSendTimeout.Duration = DefaultFileTimeout
	}
	if l.HelperPort != 0 && (l.HelperPort < 1024 || l.HelperPort > 65535) {
		k.failf(key+".helper_port", "must be 0 (the default, 45670 + uid - 501) or from 1024 to 65535, got %d", l.HelperPort)
	}
	if other, ok := chatDBs[l.ChatDB]; ok {
		k.failf(key+".chat_db", "%q is already read by %s: one Messages database serves one line", l.ChatDB, other)
	}
	chatDBs[l.ChatDB] = key
}

func (c *Config) checkLimits(k *checker) {
	if c.Limits.RequestsPerHour < 0 {
		k.failf("limits.requests_per_hour", "must be 0 (no limit) or more, got %d", c.Limits.RequestsPerHour)
	}
	if c.Limits.MaxBodyBytes < 1024 {
		k.failf("limits.max_body_bytes", "must be at least 1024, got %d", c.Limits.MaxBodyBytes)
	}
	if n := c.Limits.MaxConnections; n < 1 || n > 1<<20 {
		k.failf("limits.max_connections", "must be from 1 to 1048576, got %d", n)
	}
	if d := c.Limits.BodyIdleTimeout.Duration; d < 100*time.Millisecond || d > time.Hour {
		k.failf("limits.body_idle_timeout", "must be from 100ms to 1h, got %s", c.Limits.BodyIdleTimeout)
	}
	if n := c.Limits.StreamsPerKey; n < 1 || n > 1000 {
		k.failf("limits.streams_per_key", "must be from 1 to 1000, got %d", n)
	}
	if d := c.Limits.StreamLifetime.Duration; d < time.Second || d > 24*time.Hour {
		k.failf("limits.stream_lifetime", "must be from 1s to 24h, got %s", c.Limits.StreamLifetime)
	}

	if c.Files.MaxUploadBytes < 1 {
		k.failf("files.max_upload_bytes", "must be at least 1, got %d", c.Files.MaxUploadBytes)
	}
	if ttl := c.Files.URLTTL.Duration; ttl < time.Minute || ttl > 7*24*time.Hour {
		k.failf("files.url_ttl", "must be from 1m to 168h (7 days), got %s", c.Files.URLTTL)
	}

	c.checkWebhooks(k)

	d := c.Delivery
	if d.MaxAttempts < 1 || d.MaxAttempts > 100 {
		k.failf("delivery.max_attempts", "must be from 1 to 100, got %d", d.MaxAttempts)
	}
	if d.Workers < 1 || d.Workers > 256 {
		k.failf("delivery.workers", "must be from 1 to 256, got %d", d.Workers)
	}
	if d.RetryBase.Duration <= 0 {
		k.failf("delivery.retry_base", "must be more than 0s, got %s", d.RetryBase)
	} else if d.RetryMax.Duration < d.RetryBase.Duration {
		k.failf("delivery.retry_max", "must be at least retry_base (%s), got %s", d.RetryBase, d.RetryMax)
	}
}

func (c *Config) checkWebhooks(k *checker) {
	w := c.Webhooks
	if t := w.Timeout.Duration; t <= 0 || t > 5*time.Minute {
		k.failf("webhooks.timeout", "must be more than 0s and at most 5m, got %s", w.Timeout)
	}
	if len(w.RetrySchedule) > 50 {
		k.failf("webhooks.retry_schedule", "may have at most 50 waits, got %d", len(w.RetrySchedule))
	}
	for i, d := range w.RetrySchedule {
		if d.Duration <= 0 {
			k.failf(fmt.Sprintf("webhooks.retry_schedule[%d]", i), "must be more than 0s, got %s", d)
		}
	}
	if w.DisableAfter.Duration <= 0 {
		k.failf("webhooks.disable_after", "must be more than 0s, got %s", w.DisableAfter)
	}
	if w.Concurrency < 1 || w.Concurrency > 64 {
		k.failf("webhooks.concurrency", "must be from 1 to 64, got %d", w.Concurrency)
	}
	if w.Retention.Duration < time.Hour {
		k.failf("webhooks.retention", "must be at least 1h, got %s", w.Retention)
	}
}

// oneOf reports value unless it is one of allowed, listing the choices.
func oneOf(k *checker, key, value string, allowed ...string) {
	for _, a := range allowed {
		if value == a {
			return
		}
	}
	quoted := make([]string, len(allowed))
	for i, a := range allowed {
		quoted[i] = strconv.Quote(a)
	}
	choices := strings.Join(quoted, ", ")
	if n := len(quoted); n > 1 {
		choices = strings.Join(quoted[:n-1], ", ") + " or " + quoted[n-1]
	}
	k.failf(key, "must be %s, got %q", choices, value)
}

// checkGuard checks the [guard] table.
func (c *Config) checkGuard(k *checker) {
	g := c.Guard
	if d := g.Pace.Duration; d < 0 || d > time.Minute {
		k.failf("guard.pace", "must be from \"0s\" (no pacing) to \"1m\", got %s", g.Pace)
	}
	for _, n := range []struct {
		key      string
		v, limit int
	}{{"guard.max_unanswered", g.MaxUnanswered, 1000}, {"guard.max_ratio", g.MaxRatio, 1000},
		{"guard.max_cold_contacts", g.MaxColdContacts, 100000}, {"guard.max_availability_lookups", g.MaxAvailabilityLookups, 10000}} {
		if n.v < 0 || n.v > n.limit {
			k.failf(n.key, "must be from 0 (no cap) to %d, got %d", n.limit, n.v)
		}
	}
	if d := g.ColdAfter.Duration; d < time.Hour || d > 30*24*time.Hour {
		k.failf("guard.cold_after", "must be from \"1h\" to \"720h\" (30 days), got %s", g.ColdAfter)
	}
}

// fleetNodePattern is a node name: it becomes a NATS subject token, part of
// consumer names and the JetStream peer's name, so no dots, spaces or
// wildcards.
var fleetNodePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// minFleetSecret is the shortest fleet secret accepted.
const minFleetSecret = 16

// checkFleet checks the [fleet] table. With every setting at its default
// the fleet is off; any other setting turns it on, and then node and
// secret are required.
func (c *Config) checkFleet(k *checker) {
	f := &c.Fleet
	def := defaults().Fleet
	set := map[string]bool{
		"node": f.Node != "", "listen": f.Listen != def.Listen, "cluster": f.Cluster != "", "routes": len(f.Routes) > 0,
		"secret": f.Secret != "", "url": f.URL != "", "tls_cert": f.TLSCert != "", "tls_key": f.TLSKey != "", "tls_ca": f.TLSCA != "",
	}
	configured := false
	for _, v := range set {
		configured = configured || v
	}
	if !configured {
		return
	}

	switch {
	case f.Node == "":
		k.failf("fleet.node", "is required in a fleet: this host's name, unique in the fleet and never changed, such as \"mac-a\"")
	case !fleetNodePattern.MatchString(f.Node):
		k.failf("fleet.node", "must be 1 to 32 letters, digits, '-' or '_', starting with a letter or digit, such as \"mac-a\"; got %q", f.Node)
	}
	switch {
	case f.Secret == "":
		k.failf("fleet.secret", "is required: nothing joins or connects to the fleet without it. Generate one (for example `openssl rand -hex 32`) and give every node the same")
	case len(f.Secret) < minFleetSecret:
		k.failf("fleet.secret", "must be at least %d characters, got %d: generate one, for example with `openssl rand -hex 32`", minFleetSecret, len(f.Secret))
	}

	tlsSet := 0
	for _, name := range []string{"tls_cert", "tls_key", "tls_ca"} {
		if set[name] {
			tlsSet++
		}
	}
	if tlsSet > 0 && tlsSet < 3 {
		for _, name := range []string{"tls_cert", "tls_key", "tls_ca"} {
			if !set[name] {
				k.failf("fleet."+name, "is required with the other fleet.tls_* settings: mutual TLS needs this node's certificate (tls_cert), its key (tls_key) and the fleet's CA (tls_ca)")
			}
		}
	}
	if f.TLSFiles() {
		if _, err := tls.LoadX509KeyPair(f.TLSCert, f.TLSKey); err != nil {
			k.failf("fleet.tls_cert", "cannot load the certificate and key: %v", err)
		}
		if pem, err := os.ReadFile(f.TLSCA); err != nil {
			k.fail("fleet.tls_ca", err)
		} else if !x509.NewCertPool().AppendCertsFromPEM(pem) {
			k.failf("fleet.tls_ca", "%s holds no PEM certificate", f.TLSCA)
		}
	}

	if f.URL != "" {
		var also []string
		for _, name := range []string{"listen", "cluster", "routes"} {
			if set[name] {
				also = append(also, "fleet."+name)
			}
		}
		if len(also) > 0 {
			k.failf("fleet.url", "connects to an existing NATS instead of starting one, so %s would do nothing: remove %s, or fleet.url",
				strings.Join(also, " and "), strings.Join(also, " and "))
		}
		for i, u := range strings.Split(f.URL, ",") {
			pu, err := url.Parse(strings.TrimSpace(u))
			if err != nil || (pu.Scheme != "nats" && pu.Scheme != "tls") || pu.Host == "" {
				k.failf("fleet.url", "must be nats:// or tls:// URLs such as \"nats://user:pass@nats.internal:4222\", comma-separated; URL %d is %q", i+1, strings.TrimSpace(u))
			}
		}
		return
	}

	hasTLS := c.FleetRouteTLS() != FleetTLSNone
	const needTLS = "set fleet.tls_cert, fleet.tls_key and fleet.tls_ca (mutual TLS with the fleet's CA), or turn on [tls]"
	if checkListen(k, "fleet.listen", f.Listen, DefaultFleetListen) {
		host, _, _ := net.SplitHostPort(f.Listen)
		if !loopbackHost(host) {
			k.failf("fleet.listen", "must be a loopback address such as %q, got %q: the other nodes come in through fleet.cluster, and the client port takes the secret in clear",
				DefaultFleetListen, f.Listen)
		}
	}
	if f.Cluster != "" && checkListen(k, "fleet.cluster", f.Cluster, "0.0.0.0:6222") {
		host, _, _ := net.SplitHostPort(f.Cluster)
		if !loopbackHost(host) && !hasTLS {
			k.failf("fleet.cluster", "%q accepts routes from the network without TLS, which would carry the fleet's data and secret in clear: %s; or listen on loopback",
				f.Cluster, needTLS)
		}
	}
	if len(f.Routes) > 0 && f.Cluster == "" {
		k.failf("fleet.routes", "need fleet.cluster, the port where this node takes part in the cluster (such as \"0.0.0.0:6222\")")
	}
	for i, r := range f.Routes {
		key := fmt.Sprintf("fleet.routes[%d]", i)
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "nats" || u.Hostname() == "" || u.Port() == "" || (u.Path != "" && u.Path != "/") {
			k.failf(key, "must be a node's cluster address as nats://host:port, such as \"nats://mac-b:6222\", got %q", r)
			continue
		}
		if u.User != nil {
			k.failf(key, "must not carry credentials: the routes authenticate with fleet.secret; write %q", "nats://"+u.Host)
			continue
		}
		if !loopbackHost(u.Hostname()) && !hasTLS {
			k.failf(key, "%q is not on this machine, and a route without TLS would carry the fleet's data and secret in clear: %s", r, needTLS)
		}
	}
}

// loopbackHost reports whether host (a name or an address) is this machine
// only: "localhost" or a loopback address. An empty host is every
// interface.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
