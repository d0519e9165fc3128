package apidoc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/blueline-app/blueline/apitest"
)

// TestSchemaValidRequests measures how often the server refuses a request
// the document accepts: random requests, generated from each operation's
// parameters and body schema (types, enums, patterns, required fields,
// bounds) and checked against the document before they are sent, go to a
// daemon. At most 5 % may be answered 400 (a contact-first refusal is a 403,
// and not-found a 404: neither is counted), none 5xx, and every answer must
// be one the document describes.
//
// Values that only mean something once the server gave them (IDs,
// handles of contacts who wrote, cursors) are drawn half the time from
// those this test's daemon gave, as a client would, and otherwise made up
// from the pattern. A line is the advanced one: what a line may do is the
// lines list's to say, not a schema's.
func TestSchemaValidRequests(t *testing.T) {
	const perOperation = 12
	recv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(recv.Close)
	td := startDaemon(t, "[limits]\nrequests_per_hour = 100000\n[webhooks]\nallow_http = true\nallow_private_networks = true\n")

	// What a client of this daemon has seen: contacts who wrote, a group,
	// messages both ways, files, an outbox item, a webhook, cursors.
	in := td.simJSON("inbound", "--line", mainLine, "--from", alice, "--text", "hello")
	td.simJSON("inbound", "--line", mainLine, "--from", bob, "--text", "hi")
	td.simJSON("inbound", "--line", mainLine, "--from", carol, "--text", "hey")
	grp := td.simJSON("inbound", "--line", mainLine, "--from", alice, "--text", "hi all", "--group", "Climbing", "--participants", alice+","+bob)
	sent := td.do(201, "POST", "/v1/messages", map[string]any{"from": mainLine, "to": alice, "text": "hi back"})
	td.waitSent(sent.body["id"].(string))
	audio := td.do(201, "POST", "/v1/files", []byte("not really m4a"), "Content-Type", "audio/mp4", "X-Filename", "memo.m4a")
	hook := td.do(201, "POST", "/v1/webhooks", map[string]any{"from": mainLine, "url": recv.URL + "/hook", "events": []string{"message.received"}})
	lines := td.do(200, "GET", "/v1/lines", nil)
	var mainID string
	for _, l := range lines.body["data"].([]any) {
		if l := l.(map[string]any); l["handle"] == mainLine {
			mainID = l["id"].(string)
		}
	}
	chats := td.do(200, "GET", "/v1/chats?from="+url.QueryEscape(mainLine)+"&limit=1", nil)
	msgs := td.do(200, "GET", "/v1/messages?from="+url.QueryEscape(mainLine)+"&to="+url.QueryEscape(alice)+"&limit=1", nil)
	var sentMsg string
	for _, m := range td.do(200, "GET", "/v1/messages?from="+url.QueryEscape(mainLine)+"&to="+url.QueryEscape(alice), nil).body["data"].([]any) {
		if m := m.(map[string]any); m["is_from_me"] == true {
			sentMsg = m["id"].(string)
		}
	}
	var groupIdent string
	for _, c := range td.do(200, "GET", "/v1/chats?from="+url.QueryEscape(mainLine), nil).body["data"].([]any) {
		if c := c.(map[string]any); c["id"] == grp["chat_id"] {
			groupIdent = c["identifier"].(string)
		}
	}
	// One chat with alice holds the messages; a group holds alice and bob.
	aliceChat, group := []string{alice, in["chat_id"].(string)}, []string{grp["chat_id"].(string), groupIdent}
	messages := []string{in["id"].(string), in["guid"].(string), sentMsg}
	g := &requestGen{
		r:      rand.New(rand.NewPCG(30, 1)),
		now:    time.Now(),
		groups: []string{groupIdent},
		seen: map[string][]string{
			"from":          {mainLine, mainID},
			"line":          {mainLine, mainID},
			"to":            append(slices.Clone(aliceChat), group...),
			"handle":        {alice, bob, carol},
			"participants":  {alice, bob, carol},
			"add":           {carol},
			"remove":        {bob},
			"message_id":    messages,
			"reply_to":      {in["id"].(string), sentMsg},
			"attachments":   {audio.body["id"].(string)},
			"audio_message": {audio.body["id"].(string)},
			"voice_note":    {audio.body["id"].(string)},
			"url":           {recv.URL + "/hook"},
		},
		// What a client knows of a value besides its shape: which chat a
		// message is in, which chats are groups, which messages the line
		// sent; and that a cursor is its endpoint's.
		seenAt: map[string]map[string][]string{
			"/v1/messages":            {"to": aliceChat, "cursor": {msgs.body["next_cursor"].(string)}},
			"/v1/audio-messages":      {"to": aliceChat},
			"/v1/voice-notes":         {"to": aliceChat},
			"/v1/reactions":           {"to": aliceChat},
			"/v1/chats":               {"cursor": {chats.body["next_cursor"].(string)}},
			"/v1/edits":               {"message_id": {sentMsg}},
			"/v1/unsends":             {"message_id": {sentMsg}},
			"/v1/groups/rename":       {"to": group},
			"/v1/groups/leave":        {"to": group},
			"/v1/groups/participants": {"to": group},
			"/v1/outbox":              {"id": {sent.body["id"].(string)}},
			"/v1/outbox/cancel":       {"id": {sent.body["id"].(string)}},
			"/v1/webhooks":            {"id": {hook.body["id"].(string)}},
			"/v1/files":               {"id": {audio.body["id"].(string)}},
		},
	}

	doc := td.v.Doc()
	type operation struct {
		method, path string
		op           *openapi3.Operation
	}
	var ops []operation
	for _, path := range doc.Paths.InMatchingOrder() {
		if path == "/mcp" {
			// The MCP protocol's messages are its specification's, not this
			// document's (an object with jsonrpc).
			continue
		}
		for method, op := range doc.Paths.Value(path).Operations() {
			if op.RequestBody != nil || slices.ContainsFunc(op.Parameters, func(p *openapi3.ParameterRef) bool { return p.Value.In == "query" }) {
				ops = append(ops, operation{method, path, op})
			}
		}
	}
	slices.SortFunc(ops, func(a, b operation) int { return strings.Compare(a.method+a.path, b.method+b.path) })

	type tally struct{ sent, refused, notFound, other int }
	per := map[string]*tally{}
	var total, refused int
	client := &http.Client{Timeout: 10 * time.Second, CheckRedirect: td.client.CheckRedirect}
	for range perOperation {
		for _, o := range ops {
			req, body := g.request(t, td, o.method, o.path, o.op)
			resp, err := client.Do(req)
			if err != nil {
				t.Fatalf("%s %s: %v", o.method, req.URL, err)
			}
			// The event stream answers its status, then streams: its body
			// is not read.
			streamed := strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream")
			var raw []byte
			if !streamed {
				if raw, err = io.ReadAll(resp.Body); err != nil {
					t.Fatalf("%s %s: %v", o.method, req.URL, err)
				}
			}
			resp.Body.Close()
			key := o.method + " " + o.path
			if per[key] == nil {
				per[key] = &tally{}
			}
			c := per[key]
			c.sent++
			total++
			if err := td.v.ValidateResponse(context.Background(), req, resp.StatusCode, resp.Header, raw); err != nil && !streamed {
				t.Errorf("%s %s %s: the answer (%d %s) is not the document's: %v", o.method, req.URL, body, resp.StatusCode, raw, err)
			}
			switch s := resp.StatusCode; {
			case s >= 500:
				t.Errorf("%s %s %s: %d %s", o.method, req.URL, body, s, raw)
			case s == http.StatusBadRequest && errorCode(raw) != "contact_has_not_messaged":
				c.refused++
				refused++
				t.Logf("400 to %s %s %s: %s", o.method, req.URL, body, raw)
			case s == http.StatusNotFound:
				c.notFound++
			case s >= 400:
				c.other++
			}
		}
	}
	for _, o := range ops {
		c := per[o.method+" "+o.path]
		t.Logf("%-6s %-26s sent %3d, 400: %2d, 404: %2d, other 4xx: %2d", o.method, o.path, c.sent, c.refused, c.notFound, c.other)
	}
	t.Logf("%d schema-valid requests, %d answered 400 (%.1f %%)", total, refused, 100*float64(refused)/float64(total))
	if refused*100 > total*5 {
		t.Errorf("%d of %d schema-valid requests were answered 400 (more than 5 %%)", refused, total)
	}
}

func errorCode(raw []byte) string {
	var e struct{ Error struct{ Code string } }
	json.Unmarshal(raw, &e)
	return e.Error.Code
}

// requestGen makes requests the document accepts.
type requestGen struct {
	r      *rand.Rand
	now    time.Time
	seen   map[string][]string            // values the server gave, by field or parameter name
	seenAt map[string]map[string][]string // those that fit an operation, by path, then name
	groups []string                       // the groups' chat… identifiers
}

// request makes one request for an operation: each try is checked against
// the document (which holds rules a value generator does not, such as not,
// if and then) until one passes.
func (g *requestGen) request(t *testing.T, td *testDaemon, method, path string, op *openapi3.Operation) (*http.Request, []byte) {
	t.Helper()
	for range 200 {
		u, _ := url.Parse(td.base + path)
		q := url.Values{}
		header := http.Header{"Authorization": {"Bearer " + td.key}}
		for _, p := range op.Parameters {
			p := p.Value
			if !p.Required && g.r.IntN(2) == 0 {
				continue
			}
			switch p.In {
			case "query":
				if arr := p.Schema.Value; arr.Type.Is("array") {
					for range 1 + g.r.IntN(2) {
						q.Add(p.Name, fmt.Sprint(g.value(path, p.Name, arr.Items.Value)))
					}
				} else {
					q.Set(p.Name, fmt.Sprint(g.value(path, p.Name, p.Schema.Value)))
				}
			case "header":
				header.Set(p.Name, fmt.Sprint(g.value(path, p.Name, p.Schema.Value)))
			case "path":
				u.Path = strings.ReplaceAll(u.Path, "{"+p.Name+"}", fmt.Sprint(g.value(path, p.Name, p.Schema.Value)))
			}
		}
		u.RawQuery = q.Encode()
		var body []byte
		if rb := op.RequestBody; rb != nil {
			if mt := rb.Value.Content.Get("application/json"); mt != nil && mt.Schema != nil {
				body, _ = json.Marshal(g.value(path, "", mt.Schema.Value))
				header.Set("Content-Type", "application/json")
			} else if rb.Value.Content.Get("text/csv") != nil {
				// A list of handles, as the one CSV operation reads.
				body = fmt.Appendf(nil, "handle\n+1555%07d\n%s@example.com\n", g.r.IntN(10_000_000), g.word(1, 12))
				header.Set("Content-Type", "text/csv")
			} else {
				body = []byte(g.word(1, 64))
				header.Set("Content-Type", "text/plain")
			}
		}
		req, err := http.NewRequest(method, u.String(), bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header = header
		if err := td.v.ValidateRequest(context.Background(), req, body); err == nil {
			return req, body
		}
	}
	t.Fatalf("%s %s: no schema-valid request in 200 tries", method, path)
	return nil, nil
}

// value makes a value of schema s for the field or parameter name.
func (g *requestGen) value(path, name string, s *openapi3.Schema) any {
	switch {
	case s.Const != nil:
		return s.Const
	case len(s.Enum) > 0:
		return s.Enum[g.r.IntN(len(s.Enum))]
	}
	types := s.Type.Slice()
	if len(types) > 1 && slices.Contains(types, "null") && g.r.IntN(8) == 0 {
		return nil
	}
	switch {
	case s.Type.Includes("object"):
		obj := map[string]any{}
		for _, prop := range slices.Sorted(maps.Keys(s.Properties)) {
			if slices.Contains(s.Required, prop) || g.r.IntN(2) == 0 {
				obj[prop] = g.value(path, prop, s.Properties[prop].Value)
			}
		}
		return obj
	case s.Type.Includes("array"):
		lo, hi := int(s.MinItems), 3
		if s.MaxItems != nil && int(*s.MaxItems) < hi {
			hi = int(*s.MaxItems)
		}
		out := []any{}
		for range lo + g.r.IntN(hi-lo+1) {
			out = append(out, g.value(path, name, s.Items.Value))
		}
		return out
	case s.Type.Includes("integer"):
		if w, ok := s.Extensions["x-blueline-from-now-ms"].(map[string]any); ok {
			// A window from now: drawn a minute inside it, so that the
			// server's clock, read later, still has it in.
			lo, hi := int64(w["minimum"].(float64))+60_000, int64(w["maximum"].(float64))-60_000
			return g.now.UnixMilli() + lo + g.r.Int64N(hi-lo)
		}
		lo, hi := int64(0), int64(1_000_000)
		if s.Min != nil {
			lo = int64(*s.Min)
		}
		if s.Max != nil {
			hi = int64(*s.Max)
		}
		return lo + g.r.Int64N(hi-lo+1)
	case s.Type.Includes("boolean"):
		return g.r.IntN(2) == 0
	case s.Type.Includes("string"):
		return g.str(path, name, s)
	}
	return nil
}

func (g *requestGen) str(path, name string, s *openapi3.Schema) string {
	seen, ok := g.seenAt[path][name]
	if !ok {
		seen = g.seen[name]
	}
	if name == "cursor" {
		// A cursor is opaque: only one the endpoint gave means anything,
		// and an empty one is the first page.
		if len(seen) == 0 {
			return ""
		}
		return g.pick(seen)
	}
	if len(seen) > 0 && g.r.IntN(2) == 0 {
		return g.pick(seen)
	}
	if s.Pattern == "" {
		lo := max(int(s.MinLength), 1)
		hi := 24
		if s.MaxLength != nil {
			hi = min(hi, int(*s.MaxLength))
		}
		return g.word(lo, hi)
	}
	if item, ok := listOf(s.Pattern); ok {
		// Repeated values, comma-separated.
		var out []string
		for range 1 + g.r.IntN(2) {
			out = append(out, g.match(item))
		}
		return strings.Join(out, ",")
	}
	return g.match(s.Pattern)
}

// match makes a string that the pattern matches: one of its alternatives.
func (g *requestGen) match(pattern string) string {
	if pattern == "^"+oneEmoji+"$" {
		return g.emoji()
	}
	alts := alternatives(pattern)
	alt := alts[g.r.IntN(len(alts))]
	for _, p := range patternParts {
		if p.re == alt {
			return p.gen(g)
		}
	}
	switch {
	case alt == oneEmoji:
		return g.emoji()
	case strings.Trim(alt, "abcdefghijklmnopqrstuvwxyz") == "":
		return alt // a named tapback
	case strings.Trim(strings.ReplaceAll(alt, `\.`, ""), "abcdefghijklmnopqrstuvwxyz_") == "":
		return strings.ReplaceAll(alt, `\.`, ".") // an event's name
	}
	panic(fmt.Sprintf("requestGen: no generator for the pattern %q (of %q): add one to patternParts", alt, pattern))
}

func (g *requestGen) emoji() string {
	return g.pick([]string{"🎉", "👍🏽", "❤️", "🇫🇷", "1️⃣", "👩‍👩‍👧", "🧑🏿‍🚀", "🏴󠁧󠁢󠁳󠁣󠁴󠁿"})
}

// listOf tells a pattern of comma-separated values, ^(?:x)(?:,(?:x))*$,
// and returns the pattern of one value, ^(?:x)$.
func listOf(pattern string) (string, bool) {
	inner, ok := strings.CutPrefix(pattern, "^(?:")
	if !ok {
		return "", false
	}
	x, _, ok := strings.Cut(inner, ")(?:,(?:")
	if !ok || pattern != "^(?:"+x+")(?:,(?:"+x+"))*$" {
		return "", false
	}
	return "^(?:" + x + ")$", true
}

func (g *requestGen) pick(from []string) string { return from[g.r.IntN(len(from))] }

const alnum = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func (g *requestGen) word(lo, hi int) string {
	b := make([]byte, lo+g.r.IntN(hi-lo+1))
	for i := range b {
		b[i] = alnum[g.r.IntN(len(alnum))]
	}
	return string(b)
}

func (g *requestGen) digits(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('0' + g.r.IntN(10))
	}
	return string(b)
}

func (g *requestGen) id(prefix string) string {
	const base32 = "abcdefghijklmnopqrstuvwxyz234567"
	b := make([]byte, 26)
	for i := range b {
		b[i] = base32[g.r.IntN(len(base32))]
	}
	return prefix + string(b)
}

func (g *requestGen) phone() string {
	n := "+1555" + g.digits(7)
	if g.r.IntN(4) == 0 {
		return "+1 (555) " + n[5:8] + "-" + n[8:]
	}
	return n
}

// alternatives splits a pattern ^(?:a|b|c)$ (or ^a$, or a) into a, b and c.
func alternatives(pattern string) []string {
	p := pattern
	if strings.HasPrefix(p, "^(?:") && strings.HasSuffix(p, ")$") || strings.HasPrefix(p, "^(?:") && strings.HasSuffix(p, ")?$") {
		p = strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(p, "^(?:"), "$"), "?")
		p = strings.TrimSuffix(p, ")")
	} else if strings.HasPrefix(p, "^") && strings.HasSuffix(p, "$") {
		return []string{p[1 : len(p)-1]}
	} else {
		return []string{p}
	}
	var out []string
	depth, start := 0, 0
	for i, c := range p {
		switch c {
		case '(', '[':
			depth++
		case ')', ']':
			depth--
		case '|':
			if depth == 0 {
				out = append(out, p[start:i])
				start = i + 1
			}
		}
	}
	return append(out, p[start:])
}

// patternParts generate values of the parts of the document's patterns.
var patternParts = []struct {
	re  string
	gen func(*requestGen) string
}{
	{`\S`, func(g *requestGen) string { return g.word(1, 24) }},
	{`[\p{L}\p{N}]`, func(g *requestGen) string { return g.word(1, 24) }},
	{`\+[ ().-]*[1-9](?:[ ().-]*[0-9]){6,14}[ ().-]*`, (*requestGen).phone},
	{`(?:\+[ ().-]*| )[1-9](?:[ ().-]*[0-9]){6,14}[ ().-]*`, (*requestGen).phone},
	{`[A-Za-z0-9!#$%&'*+/=?^_` + "`" + `{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_` + "`" + `{|}~-]+)*@[^\s@.]+(?:\.[^\s@.]+)+`,
		func(g *requestGen) string { return strings.ToLower(g.word(3, 12)) + "@example.com" }},
	{`ln_[A-Za-z0-9]{1,64}`, func(g *requestGen) string { return g.id("ln_") }},
	{`cht_[A-Za-z0-9]{1,64}`, func(g *requestGen) string { return g.id("cht_") }},
	// A group's identifier is the network's name for it: a client has it
	// from the server.
	{`chat[0-9A-Za-z]{1,64}`, func(g *requestGen) string { return g.pick(g.groups) }},
	{`obx_[A-Za-z0-9]{1,64}`, func(g *requestGen) string { return g.id("obx_") }},
	{`wh_[A-Za-z0-9]{1,64}`, func(g *requestGen) string { return g.id("wh_") }},
	{`file_[A-Za-z0-9]{1,64}`, func(g *requestGen) string { return g.id("file_") }},
	{`[0-9]+`, func(g *requestGen) string { return g.digits(1 + g.r.IntN(6)) }},
	{`[0-9]{3,8}`, func(g *requestGen) string { return g.digits(3 + g.r.IntN(6)) }},
	{`https?://[^\s/?#@]+(?:[/?][^\s#]*)?`, func(g *requestGen) string { return "http://127.0.0.1:9/" + g.word(1, 12) }},
}

// oneEmoji is the document's pattern of one emoji, (?:…), read from it.
var oneEmoji = func() string {
	doc, err := apitest.LoadDocument()
	if err != nil {
		panic(err)
	}
	p := doc.Components.Schemas["SendReactionRequest"].Value.Properties["emoji"].Value.Pattern
	return strings.TrimSuffix(strings.TrimPrefix(p, "^"), "$")
}()
