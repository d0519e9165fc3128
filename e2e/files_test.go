package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/testkit"
)

// upload posts raw bytes to /v1/files; headers are name, value pairs.
func (td *testDaemon) upload(key string, data []byte, headers ...string) response {
	td.t.Helper()
	return td.call("POST", "/v1/files", key, string(data), append([]string{"Content-Type", "application/octet-stream"}, headers...)...)
}

// mustUpload uploads and returns the file's ID.
func (td *testDaemon) mustUpload(key string, data []byte, contentType, filename string) string {
	td.t.Helper()
	r := td.upload(key, data, "Content-Type", contentType, "X-Filename", filename)
	if r.Status != 201 {
		td.t.Fatalf("upload %s: %d %s", filename, r.Status, r.Raw)
	}
	return r.Body["id"].(string)
}

// get fetches a URL without an API key, as a browser following a link.
func get(t *testing.T, method, rawURL string, headers ...string) (*http.Response, []byte) {
	t.Helper()
	return apitest.Client{TB: t}.Fetch(method, rawURL, headers...)
}

// blobs lists the files folder: only complete uploads may be there.
func (td *testDaemon) blobs() []string {
	td.t.Helper()
	entries, err := os.ReadDir(filepath.Join(td.dataDir, "files"))
	if err != nil {
		td.t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// noRedirect is a client that shows a redirect instead of following it, as
// the SDK's getFileUrl does.
var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// fileRedirect is the answer to GET /v1/files?id= with key, its redirect
// not followed.
func (td *testDaemon) fileRedirect(key, id string) *http.Response {
	td.t.Helper()
	resp, _ := apitest.Client{TB: td.t, HTTP: noRedirect}.Fetch("GET", td.base+"/v1/files?id="+url.QueryEscape(id), "Authorization", "Bearer "+key)
	return resp
}

func TestFileUploadAndSignedDownload(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	data := []byte("\x89PNG fake image bytes 0123456789")
	r := td.upload(key, data, "Content-Type", "image/PNG", "X-Filename", "holiday.png")
	if r.Status != 201 {
		t.Fatalf("upload: %d %s", r.Status, r.Raw)
	}
	id := r.Body["id"].(string)
	if !strings.HasPrefix(id, "file_") || r.Body["filename"] != "holiday.png" || r.Body["mime_type"] != "image/png" ||
		r.Body["size"] != float64(len(data)) || r.Body["request_id"] == nil {
		t.Fatalf("upload answered %s", r.Raw)
	}

	// GET /v1/files redirects to a signed URL under the daemon's own base.
	resp := td.fileRedirect(key, id)
	loc := resp.Header.Get("Location")
	if resp.StatusCode != http.StatusFound || !strings.HasPrefix(loc, td.base+"/files/"+id+"?") {
		t.Fatalf("GET /v1/files: %d Location %q", resp.StatusCode, loc)
	}
	if loc != r.Body["url"] {
		t.Errorf("redirect %q differs from the upload's url %q (same minute, same URL)", loc, r.Body["url"])
	}

	dl, body := get(t, "GET", loc)
	if dl.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Fatalf("download: %d %q", dl.StatusCode, body)
	}
	if ct := dl.Header.Get("Content-Type"); ct != "image/png" {
		t.Errorf("Content-Type %q", ct)
	}
	if cd := dl.Header.Get("Content-Disposition"); cd != `attachment; filename=holiday.png` {
		t.Errorf("Content-Disposition %q", cd)
	}
	if dl.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Error("download lacks X-Content-Type-Options: nosniff")
	}

	part, body := get(t, "GET", loc, "Range", "bytes=5-9")
	if part.StatusCode != http.StatusPartialContent || string(body) != string(data[5:10]) ||
		part.Header.Get("Content-Range") != fmt.Sprintf("bytes 5-9/%d", len(data)) {
		t.Fatalf("range read: %d %q %q", part.StatusCode, body, part.Header.Get("Content-Range"))
	}
	head, body := get(t, "HEAD", loc)
	if head.StatusCode != 200 || len(body) != 0 || head.ContentLength != int64(len(data)) {
		t.Fatalf("HEAD: %d, %d bytes, length %d", head.StatusCode, len(body), head.ContentLength)
	}

	// The signature is the credential: altering any part of the URL, or
	// letting it expire, refuses the download in the error shape.
	u, _ := url.Parse(loc)
	q := u.Query()
	other := td.mustUpload(key, []byte("other"), "text/plain", "other.txt")
	tampered := map[string]string{
		"other file":      td.base + "/files/" + other + "?" + u.RawQuery,
		"later expiry":    td.base + u.Path + "?expires=" + q.Get("expires") + "0&signature=" + q.Get("signature"),
		"other signature": td.base + u.Path + "?expires=" + q.Get("expires") + "&signature=" + strings.Repeat("ab", 32),
		"no signature":    td.base + u.Path,
	}
	for name, bad := range tampered {
		resp, body := get(t, "GET", bad)
		if resp.StatusCode != 403 || !strings.Contains(string(body), `"download_url_invalid"`) {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	expired := td.d.FileURL(id, time.Now().Add(-2*time.Hour))
	if resp, body := get(t, "GET", expired); resp.StatusCode != 403 || !strings.Contains(string(body), `"download_url_expired"`) {
		t.Errorf("expired URL: %d %s", resp.StatusCode, body)
	}

	// A restart keeps files and the signing key: old URLs still work.
	td.stop()
	td.start()
	if resp, body := get(t, "GET", strings.Replace(loc, u.Host, strings.TrimPrefix(td.base, "http://"), 1)); resp.StatusCode != 200 || !bytes.Equal(body, data) {
		t.Fatalf("after restart: %d %q", resp.StatusCode, body)
	}
}

func TestFileUploadErrors(t *testing.T) {
	td := startTestDaemon(t, "[files]\nmax_upload_bytes = 1000\n")
	key := td.key()
	readOnly := td.key("--scopes", "files:read")

	cases := []struct {
		name   string
		r      response
		status int
		code   string
		param  string
	}{
		{"no key", td.upload("", []byte("x")), 401, "missing_api_key", ""},
		{"no scope", td.upload(readOnly, []byte("x")), 403, "insufficient_scope", ""},
		{"empty", td.upload(key, nil), 400, "empty_file", ""},
		{"one byte over", td.upload(key, bytes.Repeat([]byte("a"), 1001)), 413, "file_too_large", ""},
		{"bad media type", td.upload(key, []byte("x"), "Content-Type", "not a type"), 400, "invalid_parameter_value", "Content-Type"},
		{"bad encoded name", td.upload(key, []byte("x"), "X-Filename", "UTF-8''%zz"), 400, "invalid_parameter_value", "X-Filename"},
		{"GET without id", td.call("GET", "/v1/files", key, nil), 400, "missing_required_parameter", "id"},
		{"GET bad id", td.call("GET", "/v1/files?id=msg_x", key, nil), 400, "invalid_parameter_value", "id"},
		{"GET unknown id", td.call("GET", "/v1/files?id=file_22222222222222222222222222", key, nil), 404, "file_not_found", "id"},
		{"GET without scope", td.call("GET", "/v1/files?id=file_22222222222222222222222222", td.key("--scopes", "files:write"), nil), 403, "insufficient_scope", ""},
	}
	for _, c := range cases {
		if c.r.Status != c.status || c.r.ErrCode() != c.code || c.r.ErrParam() != c.param {
			t.Errorf("%s: %d %s", c.name, c.r.Status, c.r.Raw)
		}
		assertConforms(t, c.name, c.r, sdkError)
	}

	// Exactly the limit is accepted, also when the size is not declared.
	if r := td.upload(key, bytes.Repeat([]byte("b"), 1000)); r.Status != 201 || r.Body["size"] != float64(1000) {
		t.Fatalf("upload of exactly the limit: %d %s", r.Status, r.Raw)
	}
	req, _ := http.NewRequest("POST", td.base+"/v1/files", io.MultiReader(strings.NewReader(strings.Repeat("c", 1001))))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 413 || req.ContentLength != 0 {
		t.Errorf("chunked upload over the limit: %d (declared length %d)", resp.StatusCode, req.ContentLength)
	}

	// A body cut off by the client: the declared length never arrives.
	conn, err := net.Dial("tcp", strings.TrimPrefix(td.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "POST /v1/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Length: 900\r\n\r\n%s", key, strings.Repeat("d", 300))
	conn.(*net.TCPConn).CloseWrite()
	answer, _ := http.ReadResponse(bufio.NewReader(conn), nil)
	conn.Close()
	if answer == nil || answer.StatusCode != 400 {
		t.Errorf("cut-off upload answered %v", answer)
	}

	// Only the complete upload is on disk: nothing partial, no temp files.
	testkit.Eventually(t, 5*time.Second, func() bool { return len(td.blobs()) == 1 })
	if names := td.blobs(); !strings.HasPrefix(names[0], "file_") {
		t.Fatalf("files folder holds %v", names)
	}
}

func TestHostileFilenames(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	cases := map[string]string{
		"../../etc/passwd":                 "passwd",
		`..\..\Windows\win.ini`:            "win.ini",
		"/absolute/report.pdf":             "report.pdf",
		"tab\there.txt":                    "tabhere.txt",
		"..":                               "",
		"UTF-8''%E2%80%AEtxt.exe":          "txt.exe",
		"UTF-8''r%C3%A9sum%C3%A9%0A.pdf":   "résumé.pdf",
		"UTF-8''%2e%2e%2f%2e%2e%2fkey.pem": "key.pem",
	}
	for header, want := range cases {
		r := td.upload(key, []byte("content"), "X-Filename", header)
		if r.Status != 201 {
			t.Errorf("%q: %d %s", header, r.Status, r.Raw)
			continue
		}
		got, _ := r.Body["filename"].(string)
		if got != want {
			t.Errorf("X-Filename %q stored as %q, want %q", header, got, want)
		}
		// The download names the file safely too.
		resp, _ := get(t, "HEAD", r.Body["url"].(string))
		if cd := resp.Header.Get("Content-Disposition"); strings.ContainsAny(cd, "/\\\n") {
			t.Errorf("%q: Content-Disposition %q", header, cd)
		}
	}
	// Only blobs named by file ID are written, whatever the names.
	for _, name := range td.blobs() {
		if !strings.HasPrefix(name, "file_") {
			t.Errorf("unexpected entry %q in the files folder", name)
		}
	}
}

// A picture and a contact card go out as attachments; the network gets the
// file's bytes, and the history shows a downloadable attachment.
func TestSendAttachmentAndContactCard(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	td.inbound(mainLine, alice, "send me the photo")

	photo := bytes.Repeat([]byte{0xff, 0xd8, 0x01}, 5000)
	photoID := td.mustUpload(key, photo, "image/jpeg", "photo.jpg")
	obx := td.send(key, map[string]any{"from": mainLine, "to": alice, "text": "here", "attachments": []string{photoID}})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("photo: %v", item)
	}
	vcard := "BEGIN:VCARD\r\nVERSION:3.0\r\nFN:Ada Lovelace\r\nTEL:+15550102000\r\nEND:VCARD\r\n"
	cardID := td.mustUpload(key, []byte(vcard), "text/vcard", "ada.vcf")
	obx = td.send(key, map[string]any{"from": mainLine, "to": alice, "attachments": []string{cardID}})
	if item := td.waitOutbox(key, obx["id"].(string)); item["status"] != "sent" {
		t.Fatalf("contact card: %v", item)
	}

	sent := td.d.Sim().Delivered()
	if len(sent) != 2 || sent[0].Attachment == nil || sent[1].Attachment == nil {
		t.Fatalf("network got %+v", sent)
	}
	if got, err := os.ReadFile(sent[0].Attachment.Path); err != nil || !bytes.Equal(got, photo) ||
		sent[0].Attachment.MimeType != "image/jpeg" || sent[0].Attachment.Filename != "photo.jpg" || sent[0].Text != "here" {
		t.Errorf("photo as sent: %+v (%v)", sent[0], err)
	}
	if sent[1].Text != "" || sent[1].Attachment.MimeType != "text/vcard" || sent[1].IsAudioMessage {
		t.Errorf("contact card as sent: %+v", sent[1])
	}

	hist := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil).Data()
	card, pic := hist[0], hist[1]
	if card["text"] != nil || card["is_audio_message"] != false {
		t.Errorf("contact card message: %v", card)
	}
	att := card["attachments"].([]any)[0].(map[string]any)
	if att["filename"] != "ada.vcf" || att["mime_type"] != "text/vcard" || att["size"] != float64(len(vcard)) || att["transcription"] != nil {
		t.Errorf("contact card attachment: %v", att)
	}
	resp, body := get(t, "GET", att["url"].(string))
	if resp.StatusCode != 200 || string(body) != vcard {
		t.Errorf("contact card download: %d %q", resp.StatusCode, body)
	}
	att = pic["attachments"].([]any)[0].(map[string]any)
	if resp, body := get(t, "GET", att["url"].(string)); resp.StatusCode != 200 || !bytes.Equal(body, photo) {
		t.Errorf("photo download: %d, %d bytes", resp.StatusCode, len(body))
	}

	// Attachment errors.
	for _, c := range []struct {
		body  map[string]any
		code  string
		param string
	}{
		{map[string]any{"from": mainLine, "to": alice, "attachments": []string{"file_22222222222222222222222222"}}, "file_not_found", "attachments"},
		{map[string]any{"from": mainLine, "to": alice, "attachments": []string{photoID, cardID}}, "invalid_parameter_value", "attachments"},
		{map[string]any{"from": mainLine, "to": alice, "attachments": []string{"photo.jpg"}}, "invalid_parameter_value", "attachments"},
		{map[string]any{"from": mainLine, "to": alice, "attachments": []string{}}, "missing_required_parameter", "text"},
	} {
		if r := td.call("POST", "/v1/messages", key, c.body); r.ErrCode() != c.code || r.ErrParam() != c.param {
			t.Errorf("%v: %d %s", c.body, r.Status, r.Raw)
		}
	}
}

// Simulated contacts send pictures, contact cards and voice memos, whose
// transcription may come later.
func TestSimInboundAttachments(t *testing.T) {
	td := startTestDaemon(t, "")
	key := td.key()
	dir := t.TempDir()
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	pic := write("cat.jpg", []byte("jpeg bytes"))
	card := write("bob.vcf", []byte("BEGIN:VCARD\r\nFN:Bob\r\nEND:VCARD\r\n"))
	memo := write("memo.m4a", bytes.Repeat([]byte("aac"), 1000))

	var m map[string]any
	decodeJSON(t, td.mustCLI("sim", "inbound", "--line", mainLine, "--from", alice, "--attach", pic, "--text", "look"), &m)
	att := m["attachments"].([]any)[0].(map[string]any)
	if m["text"] != "look" || att["filename"] != "cat.jpg" || att["mime_type"] != "image/jpeg" || att["size"] != float64(10) {
		t.Errorf("picture: %v", m)
	}
	if resp, body := get(t, "GET", att["url"].(string)); resp.StatusCode != 200 || string(body) != "jpeg bytes" {
		t.Errorf("picture download: %d %q", resp.StatusCode, body)
	}

	decodeJSON(t, td.mustCLI("sim", "inbound", "--line", mainLine, "--from", alice, "--attach", card), &m)
	att = m["attachments"].([]any)[0].(map[string]any)
	if m["text"] != nil || att["mime_type"] != "text/vcard" {
		t.Errorf("contact card: %v", m)
	}

	decodeJSON(t, td.mustCLI("sim", "inbound", "--line", mainLine, "--from", alice, "--audio", memo, "--transcription", "call me back"), &m)
	att = m["attachments"].([]any)[0].(map[string]any)
	if m["is_audio_message"] != true || att["mime_type"] != "audio/mp4" || att["transcription"] != "call me back" || m["text"] != nil {
		t.Errorf("voice memo: %v", m)
	}
	decodeJSON(t, td.mustCLI("sim", "inbound", "--line", mainLine, "--from", alice, "--audio", memo), &m)
	att = m["attachments"].([]any)[0].(map[string]any)
	if m["is_audio_message"] != true || att["transcription"] != nil {
		t.Errorf("voice memo not yet transcribed: %v", m)
	}

	hist := td.call("GET", "/v1/messages?from="+mainLine+"&to="+alice, key, nil)
	assertConforms(t, "history with attachments", hist, sdkList(sdkMessage))
	if n := len(hist.Data()); n != 4 {
		t.Fatalf("history has %d messages", n)
	}

	// A relative path is resolved where the command runs, not where the
	// daemon does.
	t.Chdir(dir)
	decodeJSON(t, td.mustCLI("sim", "inbound", "--line", mainLine, "--from", alice, "--attach", "cat.jpg"), &m)
	if att := m["attachments"].([]any)[0].(map[string]any); att["filename"] != "cat.jpg" || att["size"] != float64(10) {
		t.Errorf("relative --attach: %v", m)
	}

	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--attach", filepath.Join(dir, "missing.png")}, 1, "No file at"},
		{[]string{"--audio", pic}, 1, "audio file"},
		{[]string{"--attach", pic, "--audio", memo}, 1, "not both"},
		{[]string{"--text", "x", "--transcription", "y"}, 2, "--transcription goes with --audio"},
		{[]string{}, 2, "needs --line, --from and --text"},
	} {
		_, stderr, code := td.cli(append([]string{"sim", "inbound", "--line", mainLine, "--from", alice}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.msg) {
			t.Errorf("sim inbound %v: exit %d, %q", c.args, code, stderr)
		}
	}
	if names := td.blobs(); len(names) != 5 || slices.ContainsFunc(names, func(n string) bool { return !strings.HasPrefix(n, "file_") }) {
		t.Errorf("files folder: %v", names)
	}
}
