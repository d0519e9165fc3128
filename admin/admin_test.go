package admin_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/admin"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

func TestKeys(t *testing.T) {
	e := newEnv(t, envOptions{})
	before := time.Now().UnixMilli()
	created := e.ok(http.StatusCreated, "POST", "/keys", api.KeyRequest{Label: "  ci  ", Scopes: "messages:read,lines:read",
		Lines: []string{mainLine, e.lines[smsLine].ID}, Owner: " acme "})
	secret, _ := created["key"].(string)
	if !strings.HasPrefix(secret, "sk_live_") {
		t.Fatalf("created key has secret %q", secret)
	}
	id, _ := created["id"].(string)
	if created["label"] != "ci" || created["owner"] != "acme" || created["created_at"].(float64) < float64(before) {
		t.Errorf("created key: %v", created)
	}
	if got := created["lines"].([]any); len(got) != 2 || got[0] != mainLine || got[1] != smsLine {
		t.Errorf("lines = %v, want the handles of both lines", got)
	}
	if got := created["scopes"].([]any); len(got) != 2 || got[0] != "messages:read" || got[1] != "lines:read" {
		t.Errorf("scopes = %v", got)
	}
	hint, _ := created["hint"].(string)
	if hint == "" || !strings.HasSuffix(secret, strings.TrimPrefix(hint, "sk_live_…")) {
		t.Errorf("hint %q does not end the secret", hint)
	}
	// A key for every line, every scope.
	all := e.ok(http.StatusCreated, "POST", "/keys", api.KeyRequest{Label: "all", Scopes: "all"})
	if got := all["lines"].([]any); len(got) != 0 {
		t.Errorf("a key for every line lists lines %v", got)
	}
	if got := all["scopes"].([]any); len(got) != len(api.Scopes) {
		t.Errorf("scopes of an all key = %v", got)
	}

	// Stored as answered.
	keys, err := e.db.Keys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(keys, func(k storage.Key) bool { return k.ID == id })
	if i < 0 {
		t.Fatalf("key %s not stored: %+v", id, keys)
	}
	if k := keys[i]; k.Label != "ci" || k.Owner != "acme" || !slices.Equal(k.LineIDs, []string{e.lines[mainLine].ID, e.lines[smsLine].ID}) {
		t.Errorf("stored key %+v", k)
	}

	// Listed without their secrets.
	r := e.call("GET", "/keys", nil)
	list := r.data(t)
	if r.status != http.StatusOK || len(list) != 2 {
		t.Fatalf("GET /keys: %d %s", r.status, r.body)
	}
	for _, k := range list {
		if _, ok := k["key"]; ok {
			t.Errorf("listed key shows its secret: %v", k)
		}
	}
	if strings.Contains(string(r.body), secret) {
		t.Errorf("the list holds a secret: %s", r.body)
	}

	// Refusals.
	e.refused(400, "invalid_json", "", "POST", "/keys", "{")
	e.refused(400, "missing_required_parameter", "label", "POST", "/keys", api.KeyRequest{Label: "   "})
	e.refused(400, "invalid_parameter_value", "label", "POST", "/keys", api.KeyRequest{Label: "a\tb"})
	e.refused(400, "invalid_parameter_value", "label", "POST", "/keys", api.KeyRequest{Label: "a", Owner: "x\ny"})
	e.refused(400, "invalid_parameter_value", "scopes", "POST", "/keys", api.KeyRequest{Label: "a", Scopes: "messages:fly"})
	e.refused(400, "invalid_parameter_value", "lines", "POST", "/keys", api.KeyRequest{Label: "a", Scopes: "all", Lines: []string{"not a handle"}})
	e.refused(404, "line_not_found", "lines", "POST", "/keys", api.KeyRequest{Label: "a", Scopes: "all", Lines: []string{"+15559999999"}})
	e.refused(404, "line_not_found", "lines", "POST", "/keys", api.KeyRequest{Label: "a", Scopes: "all", Lines: []string{"ln_nope"}})
	if keys, _ := e.db.Keys(context.Background()); len(keys) != 2 {
		t.Errorf("refused requests stored keys: %d keys", len(keys))
	}

	// Revoking.
	rev := e.ok(http.StatusOK, "POST", "/keys/revoke", map[string]string{"id": id})
	if rev["id"] != id || rev["revoked"] != true || !strings.HasPrefix(rev["request_id"].(string), "req_") {
		t.Errorf("revoke answered %v", rev)
	}
	keys, _ = e.db.Keys(context.Background())
	for _, k := range keys {
		if (k.ID == id) != (k.RevokedAt != 0) {
			t.Errorf("key %s revoked at %d", k.ID, k.RevokedAt)
		}
	}
	e.refused(404, "key_not_found", "id", "POST", "/keys/revoke", map[string]string{"id": id})
	e.refused(404, "key_not_found", "id", "POST", "/keys/revoke", map[string]string{"id": "key_nope"})
	e.refused(400, "invalid_json", "", "POST", "/keys/revoke", "[")
	if !strings.Contains(e.logs.String(), "API key revoked") {
		t.Errorf("revocation not logged: %s", e.logs.String())
	}
}

func TestUnknownRoute(t *testing.T) {
	e := newEnv(t, envOptions{})
	msg := e.refused(404, "route_not_found", "", "GET", "/nope", nil)
	if !strings.Contains(msg, "GET /nope") {
		t.Errorf("message %q does not name the route", msg)
	}
	e.refused(404, "route_not_found", "", "POST", "/keys/nope", map[string]string{})
}

// Every command that takes a JSON body refuses one that is not JSON, and
// changes nothing.
func TestInvalidJSON(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, path := range []string{"/keys", "/keys/revoke", "/sim/inbound", "/sim/reaction", "/sim/typing", "/sim/edit", "/sim/unsend",
		"/sim/read", "/sim/group", "/sim/availability", "/sandbox", "/webhooks/redeliver", "/webhooks/test", "/dashboard/link",
		"/dashboard/password", "/dashboard/sessions/end"} {
		msg := e.refused(400, "invalid_json", "", "POST", path, `{"line": `)
		if !strings.Contains(msg, "not valid JSON") {
			t.Errorf("%s: message %q", path, msg)
		}
	}
	if keys, _ := e.db.Keys(context.Background()); len(keys) != 0 {
		t.Errorf("keys after refusals: %v", keys)
	}
}

// The API itself, as the host's operator or as an owner.
func TestAPIPassthrough(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.call("GET", "/v1/lines", nil)
	if r.status != http.StatusOK {
		t.Fatalf("GET /v1/lines: %d %s", r.status, r.body)
	}
	var handles []string
	for _, l := range r.data(t) {
		handles = append(handles, l["handle"].(string))
	}
	slices.Sort(handles)
	if want := []string{sandboxLine, mainLine, smsLine, macLine}; !slices.Equal(handles, want) {
		t.Errorf("lines = %v, want %v", handles, want)
	}
	// The API answers its own errors in its shape.
	e.refused(404, "route_not_found", "", "GET", "/v1/nope", nil)
	// Writes go through too: a webhook, then its deletion.
	hook := e.ok(http.StatusCreated, "POST", "/v1/webhooks", map[string]any{"from": mainLine, "url": "http://127.0.0.1:9/hook", "events": []string{"message.received"}})
	id := hook["id"].(string)
	if _, err := e.db.WebhookByID(context.Background(), id); err != nil {
		t.Fatalf("webhook %s not stored: %v", id, err)
	}
	if del := e.ok(http.StatusOK, "DELETE", "/v1/webhooks", map[string]string{"id": id}); del["deleted"] != true {
		t.Errorf("DELETE /v1/webhooks answered %v", del)
	}
	if h, err := e.db.WebhookByID(context.Background(), id); err == nil && h.IsActive {
		t.Errorf("webhook %s still active after its deletion", id)
	}
	// As an owner: the sandbox is that owner's.
	r = e.call("GET", "/v1/sandbox", nil, api.OwnerHeader, "acme")
	var sb api.Sandbox
	r.decode(t, &sb)
	if r.status != http.StatusOK || sb.Status != "missing" || sb.SandboxLineHandle != sandboxLine {
		t.Errorf("GET /v1/sandbox as an owner: %d %s", r.status, r.body)
	}
}

func TestMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.call("GET", "/metrics", nil)
	if r.status != http.StatusOK || !strings.Contains(string(r.body), "# TYPE") {
		t.Errorf("GET /metrics: %d %.300s", r.status, r.body)
	}
	none := newEnv(t, envOptions{adjust: func(o *admin.Options) { o.Metrics = nil }})
	none.refused(404, "route_not_found", "", "GET", "/metrics", nil)
}

// A backup is a copy of the database that opens, with what was stored.
func TestBackup(t *testing.T) {
	e := newEnv(t, envOptions{})
	key := e.ok(http.StatusCreated, "POST", "/keys", api.KeyRequest{Label: "kept", Scopes: "all"})
	m := e.inbound(mainLine, alice, "keep me")
	r := e.call("GET", "/backup", nil)
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/octet-stream" || len(r.body) == 0 {
		t.Fatalf("GET /backup: %d %s, %d bytes", r.status, r.header.Get("Content-Type"), len(r.body))
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "db.bolt"), r.body, 0o600); err != nil {
		t.Fatal(err)
	}
	copyDB, err := storage.Open(dir)
	if err != nil {
		t.Fatalf("the backup does not open: %v", err)
	}
	defer copyDB.Close()
	keys, err := copyDB.Keys(context.Background())
	if err != nil || len(keys) != 1 || keys[0].ID != key["id"] {
		t.Errorf("keys of the backup: %+v, %v", keys, err)
	}
	got, err := copyDB.MessageByID(context.Background(), m["id"].(string))
	if err != nil || got.Text == nil || *got.Text != "keep me" {
		t.Errorf("message of the backup: %+v, %v", got, err)
	}
	if !strings.Contains(e.logs.String(), "backup taken") {
		t.Errorf("backup not logged")
	}
}

func TestSandbox(t *testing.T) {
	e := newEnv(t, envOptions{})
	var info api.SandboxInfo
	r := e.call("GET", "/sandbox", nil)
	r.decode(t, &info)
	if r.status != http.StatusOK || info.Handle != sandboxLine || info.LineID != e.lines[sandboxLine].ID || info.Owners == nil || len(info.Owners) != 0 {
		t.Fatalf("GET /sandbox with no owners: %d %s", r.status, r.body)
	}
	// An owner with a key is listed before starting; a revoked key's owner
	// is not.
	e.ok(http.StatusCreated, "POST", "/keys", api.KeyRequest{Label: "k", Scopes: "all", Owner: "zed"})
	gone := e.ok(http.StatusCreated, "POST", "/keys", api.KeyRequest{Label: "k", Scopes: "all", Owner: "gone"})
	e.ok(http.StatusOK, "POST", "/keys/revoke", map[string]string{"id": gone["id"].(string)})

	var started api.SandboxOwnerInfo
	r = e.call("POST", "/sandbox", map[string]string{"owner": " acme "})
	r.decode(t, &started)
	if r.status != http.StatusOK || started.Owner != "acme" || started.Status != "pending" || started.ActivationCode == nil || started.RequestID != "" {
		t.Fatalf("POST /sandbox: %d %s", r.status, r.body)
	}
	if st, ok, err := e.db.Sandbox(context.Background(), "acme"); err != nil || !ok || st.ActivationCode != *started.ActivationCode {
		t.Errorf("stored sandbox %+v %v %v", st, ok, err)
	}
	// Starting again keeps the code.
	var again api.SandboxOwnerInfo
	e.call("POST", "/sandbox", map[string]string{"owner": "acme"}).decode(t, &again)
	if again.ActivationCode == nil || *again.ActivationCode != *started.ActivationCode {
		t.Errorf("second start gave code %v, first %v", again.ActivationCode, *started.ActivationCode)
	}

	// Texting the code to the sandbox line activates it.
	e.inbound(sandboxLine, alice, *started.ActivationCode)
	r = e.call("GET", "/sandbox", nil)
	info = api.SandboxInfo{}
	r.decode(t, &info)
	if len(info.Owners) != 2 || info.Owners[0].Owner != "acme" || info.Owners[1].Owner != "zed" {
		t.Fatalf("owners = %+v", info.Owners)
	}
	acme, zed := info.Owners[0], info.Owners[1]
	if acme.Status != "active" || acme.ContactIdentifier == nil || *acme.ContactIdentifier != alice || acme.Usage.Limit != 5 || acme.RequestID != "" {
		t.Errorf("acme's sandbox: %+v", acme)
	}
	if zed.Status != "missing" || zed.ActivationCode != nil {
		t.Errorf("zed's sandbox: %+v", zed)
	}
	if !strings.Contains(e.logs.String(), "sandbox line activated") {
		t.Errorf("activation not logged")
	}

	e.refused(400, "missing_required_parameter", "owner", "POST", "/sandbox", map[string]string{"owner": "  "})

	// Without a sandbox line.
	bare := newEnv(t, envOptions{noSandbox: true})
	bare.refused(404, "line_not_found", "", "GET", "/sandbox", nil)
	bare.refused(404, "line_not_found", "", "POST", "/sandbox", map[string]string{"owner": "acme"})
}

func TestSimAvailability(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	var got api.SimAvailability
	r := e.call("POST", "/sim/availability", map[string]any{"handle": " +1 (555) 111-0001 ", "imessage": false})
	r.decode(t, &got)
	if r.status != http.StatusOK || got.Handle != alice || got.IMessage {
		t.Fatalf("POST /sim/availability: %d %s", r.status, r.body)
	}
	if on, err := e.network.Availability(ctx, mainLine, alice); err != nil || on {
		t.Errorf("the network answers %v, %v for %s", on, err, alice)
	}
	e.ok(http.StatusOK, "POST", "/sim/availability", map[string]any{"handle": alice, "imessage": true})
	if on, err := e.network.Availability(ctx, mainLine, alice); err != nil || !on {
		t.Errorf("the network answers %v, %v after setting it on", on, err)
	}
	e.refused(400, "invalid_parameter_value", "handle", "POST", "/sim/availability", map[string]any{"handle": "nobody"})

	none := newEnv(t, envOptions{adjust: func(o *admin.Options) { o.SimAvailability = nil }})
	none.refused(400, "sim_unavailable", "", "POST", "/sim/availability", map[string]any{"handle": alice})
}

func TestDashboard(t *testing.T) {
	e := newEnv(t, envOptions{})
	ctx := context.Background()
	before := time.Now().UnixMilli()
	link := e.ok(http.StatusCreated, "POST", "/dashboard/link", map[string]string{"owner": " acme "})
	url, _ := link["url"].(string)
	if !strings.HasPrefix(url, baseURL+"/dashboard/login?token=") || len(url) <= len(baseURL+"/dashboard/login?token=") {
		t.Errorf("link url = %q", url)
	}
	if link["owner"] != "acme" || link["expires_at"].(float64) <= float64(before) {
		t.Errorf("link = %v", link)
	}
	e.ok(http.StatusCreated, "POST", "/dashboard/link", map[string]string{})
	e.refused(400, "invalid_parameter_value", "owner", "POST", "/dashboard/link", map[string]string{"owner": "a\x00b"})

	// The password.
	e.refused(400, "invalid_parameter_value", "password", "POST", "/dashboard/password", map[string]string{"password": "short"})
	e.refused(400, "invalid_parameter_value", "password", "POST", "/dashboard/password", map[string]string{"password": strings.Repeat("é", 600)})
	if h, _ := e.db.ConsolePassword(ctx); len(h) != 0 {
		t.Fatalf("refused passwords were stored")
	}
	set := e.ok(http.StatusOK, "POST", "/dashboard/password", map[string]string{"password": testPassword})
	if set["password_set"] != true {
		t.Errorf("set password answered %v", set)
	}
	if h, err := e.db.ConsolePassword(ctx); err != nil || len(h) == 0 || strings.Contains(string(h), testPassword) {
		t.Errorf("stored password hash %q, %v", h, err)
	}
	cleared := e.ok(http.StatusOK, "POST", "/dashboard/password", map[string]string{"password": ""})
	if cleared["password_set"] != false {
		t.Errorf("clearing answered %v", cleared)
	}
	if h, _ := e.db.ConsolePassword(ctx); len(h) != 0 {
		t.Errorf("password still stored after clearing: %q", h)
	}

	// Sessions.
	r := e.call("GET", "/dashboard/sessions", nil)
	if r.status != http.StatusOK || len(r.data(t)) != 0 {
		t.Fatalf("sessions with none: %d %s", r.status, r.body)
	}
	now := time.Now().UnixMilli()
	one, two := storage.NewID("ses_"), storage.NewID("ses_")
	for i, s := range []storage.Session{
		{ID: one, Owner: "acme", Via: "link", CreatedAt: now, ExpiresAt: now + 3600_000},
		{ID: two, Via: "password", CreatedAt: now, ExpiresAt: now + 3600_000},
		{ID: storage.NewID("ses_"), Via: "link", CreatedAt: now - 7200_000, ExpiresAt: now - 3600_000}, // expired
	} {
		if err := e.db.CreateSession(ctx, []byte{byte(i)}, s); err != nil {
			t.Fatal(err)
		}
	}
	sessions := e.call("GET", "/dashboard/sessions", nil).data(t)
	if len(sessions) != 2 {
		t.Fatalf("sessions = %v, want the two valid ones", sessions)
	}
	for _, s := range sessions {
		if s["id"] == one && (s["owner"] != "acme" || s["via"] != "link") || s["id"] != one && s["id"] != two {
			t.Errorf("session %v", s)
		}
	}
	ended := e.ok(http.StatusOK, "POST", "/dashboard/sessions/end", map[string]string{"id": one})
	if ended["ended"] != float64(1) {
		t.Errorf("ending one answered %v", ended)
	}
	e.refused(404, "session_not_found", "id", "POST", "/dashboard/sessions/end", map[string]string{"id": one})
	e.refused(404, "session_not_found", "id", "POST", "/dashboard/sessions/end", map[string]string{"id": "not-a-session"})
	if left, _ := e.db.Sessions(ctx, time.Now().UnixMilli()); len(left) != 1 || left[0].ID != two {
		t.Errorf("sessions left: %+v", left)
	}
	ended = e.ok(http.StatusOK, "POST", "/dashboard/sessions/end", map[string]string{})
	if ended["ended"].(float64) < 1 {
		t.Errorf("ending all answered %v", ended)
	}
	if left, _ := e.db.Sessions(ctx, time.Now().UnixMilli()); len(left) != 0 {
		t.Errorf("sessions left after ending all: %+v", left)
	}

	// With the console off.
	off := newEnv(t, envOptions{adjust: func(o *admin.Options) { o.Dashboard = nil }})
	off.refused(404, "dashboard_disabled", "", "POST", "/dashboard/link", map[string]string{})
	off.refused(404, "dashboard_disabled", "", "POST", "/dashboard/password", map[string]string{"password": testPassword})
}

// An agent key's sender gating is stored and shown as created, its
// handles normalised; it is refused on a key that is not an agent's, with
// a handle that is not one, or with a mention that is not a regexp.
func TestKeySenderGating(t *testing.T) {
	e := newEnv(t, envOptions{})
	created := e.ok(http.StatusCreated, "POST", "/keys", api.KeyRequest{Label: "family-bot", Scopes: "all", Agent: true,
		AllowFrom: []string{"+1 (555) 111-0001", "Ann@Example.com", "+15551110001"}, GroupMention: `(?i)@bot\b`})
	if got := created["allow_from"].([]any); len(got) != 2 || got[0] != "+15551110001" || got[1] != "ann@example.com" {
		t.Errorf("allow_from = %v, want the two handles normalised", got)
	}
	if created["group_mention"] != `(?i)@bot\b` {
		t.Errorf("group_mention = %v", created["group_mention"])
	}
	keys, err := e.db.Keys(context.Background())
	if err != nil || len(keys) != 1 || !slices.Equal(keys[0].AllowFrom, []string{"+15551110001", "ann@example.com"}) || keys[0].GroupMention != `(?i)@bot\b` {
		t.Fatalf("stored %+v, %v", keys, err)
	}
	plain := e.ok(http.StatusCreated, "POST", "/keys", api.KeyRequest{Label: "plain", Scopes: "all"})
	if got := plain["allow_from"].([]any); len(got) != 0 || plain["group_mention"] != "" {
		t.Errorf("a key without gating shows %v and %q", got, plain["group_mention"])
	}
	e.refused(400, "invalid_parameter_value", "allow_from", "POST", "/keys", api.KeyRequest{Label: "a", Scopes: "all", AllowFrom: []string{"+15551110001"}})
	e.refused(400, "invalid_parameter_value", "group_mention", "POST", "/keys", api.KeyRequest{Label: "a", Scopes: "all", GroupMention: "@bot"})
	e.refused(400, "invalid_parameter_value", "allow_from", "POST", "/keys", api.KeyRequest{Label: "a", Scopes: "all", Agent: true, AllowFrom: []string{"nobody"}})
	e.refused(400, "invalid_parameter_value", "group_mention", "POST", "/keys", api.KeyRequest{Label: "a", Scopes: "all", Agent: true, GroupMention: "(@bot"})
}
