package messages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
)

// Golden copies of the scripts: a change to a script must change these too.
const (
	goldenTextToChat = `on run argv
	set chatGUID to item 1 of argv
	set messageText to item 2 of argv
	set waitSeconds to (item 3 of argv) as integer
	tell application "Messages"
		with timeout of waitSeconds seconds
			send messageText to chat id chatGUID
		end timeout
	end tell
end run
`
	goldenTextToParticipant = `on run argv
	set targetAddress to item 1 of argv
	set messageText to item 2 of argv
	set serviceName to item 3 of argv
	set waitSeconds to (item 4 of argv) as integer
	tell application "Messages"
		with timeout of waitSeconds seconds
			if serviceName is "SMS" then
				set targetAccount to 1st account whose service type = SMS
			else if serviceName is "iMessage" then
				set targetAccount to 1st account whose service type = iMessage
			else
				error "unsupported service" number -1700
			end if
			send messageText to participant targetAddress of targetAccount
		end timeout
	end tell
end run
`
	goldenFileToChat = `on run argv
	set chatGUID to item 1 of argv
	set attachmentFile to (item 2 of argv) as POSIX file
	set waitSeconds to (item 3 of argv) as integer
	tell application "Messages"
		with timeout of waitSeconds seconds
			send attachmentFile to chat id chatGUID
		end timeout
	end tell
end run
`
	goldenFileToParticipant = `on run argv
	set targetAddress to item 1 of argv
	set attachmentFile to (item 2 of argv) as POSIX file
	set serviceName to item 3 of argv
	set waitSeconds to (item 4 of argv) as integer
	tell application "Messages"
		with timeout of waitSeconds seconds
			if serviceName is "SMS" then
				set targetAccount to 1st account whose service type = SMS
			else if serviceName is "iMessage" then
				set targetAccount to 1st account whose service type = iMessage
			else
				error "unsupported service" number -1700
			end if
			send attachmentFile to participant targetAddress of targetAccount
		end timeout
	end tell
end run
`
	goldenEnsureMessages = `on run argv
	if application "Messages" is not running then
		launch application "Messages"
	end if
end run
`
)

const (
	testDM      = "iMessage;-;+15550102000"
	testDMAddr  = "+15550102000"
	testSMSDM   = "SMS;-;+15550102000"
	testGroup   = "iMessage;+;chat123456789"
	testFile    = "/Users/me/Library/Messages/Attachments/blueline/x/photo.jpg"
	testTimeout = 30 * time.Second
	testSeconds = "28" // testTimeout less the margin
)

// scriptCall is one script run, as the runner saw it.
type scriptCall struct {
	script   string
	args     []string
	deadline time.Time
}

// recRunner records runs and answers with the scripted errors in turn
// (nil once they run out).
type recRunner struct {
	mu      sync.Mutex
	calls   []scriptCall
	results []error
}

func (r *recRunner) Run(ctx context.Context, script string, args []string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	d, _ := ctx.Deadline()
	r.calls = append(r.calls, scriptCall{script: script, args: slices.Clone(args), deadline: d})
	if i := len(r.calls) - 1; i < len(r.results) {
		return "", r.results[i]
	}
	return "", nil
}

func (r *recRunner) recorded() []scriptCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func notFound(what string) *ScriptError {
	return &ScriptError{ExitCode: 1, Code: -1728,
		Stderr: fmt.Sprintf("0:120: execution error: Messages got an error: Can’t get %s. (-1728)\n", what)}
}

func checkCalls(t *testing.T, got []scriptCall, want []scriptCall) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d runs, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i].script != want[i].script {
			t.Errorf("run %d script:\n%s\nwant:\n%s", i, got[i].script, want[i].script)
		}
		if !slices.Equal(got[i].args, want[i].args) {
			t.Errorf("run %d argv = %q, want %q", i, got[i].args, want[i].args)
		}
	}
}

func TestSenderScripts(t *testing.T) {
	tests := []struct {
		name    string
		results []error
		send    func(s *Sender) error
		want    []scriptCall
	}{
		{
			name: "text to a chat",
			send: func(s *Sender) error { return s.SendText(t.Context(), testDM, testDMAddr, "imessage", "hello") },
			want: []scriptCall{{script: goldenTextToChat, args: []string{testDM, "hello", testSeconds}}},
		},
		{
			name: "text to a group",
			send: func(s *Sender) error { return s.SendText(t.Context(), testGroup, "", "imessage", "hello all") },
			want: []scriptCall{{script: goldenTextToChat, args: []string{testGroup, "hello all", testSeconds}}},
		},
		{
			name:    "text to an iMessage participant",
			results: []error{notFound(`chat id "` + testDM + `"`)},
			send:    func(s *Sender) error { return s.SendText(t.Context(), testDM, testDMAddr, "imessage", "hello") },
			want: []scriptCall{
				{script: goldenTextToChat, args: []string{testDM, "hello", testSeconds}},
				{script: goldenTextToParticipant, args: []string{testDMAddr, "hello", "iMessage", testSeconds}},
			},
		},
		{
			name:    "text to an SMS participant",
			results: []error{notFound(`chat id "` + testSMSDM + `"`)},
			send:    func(s *Sender) error { return s.SendText(t.Context(), testSMSDM, testDMAddr, "sms", "hello") },
			want: []scriptCall{
				{script: goldenTextToChat, args: []string{testSMSDM, "hello", testSeconds}},
				{script: goldenTextToParticipant, args: []string{testDMAddr, "hello", "SMS", testSeconds}},
			},
		},
		{
			name: "file to a chat",
			send: func(s *Sender) error { return s.SendFile(t.Context(), testGroup, "", "imessage", testFile) },
			want: []scriptCall{{script: goldenFileToChat, args: []string{testGroup, testFile, testSeconds}}},
		},
		{
			name:    "file to an iMessage participant",
			results: []error{notFound(`chat id "` + testDM + `"`)},
			send:    func(s *Sender) error { return s.SendFile(t.Context(), testDM, testDMAddr, "imessage", testFile) },
			want: []scriptCall{
				{script: goldenFileToChat, args: []string{testDM, testFile, testSeconds}},
				{script: goldenFileToParticipant, args: []string{testDMAddr, testFile, "iMessage", testSeconds}},
			},
		},
		{
			name:    "file to an SMS participant",
			results: []error{notFound(`chat id "` + testSMSDM + `"`)},
			send:    func(s *Sender) error { return s.SendFile(t.Context(), testSMSDM, testDMAddr, "sms", testFile) },
			want: []scriptCall{
				{script: goldenFileToChat, args: []string{testSMSDM, testFile, testSeconds}},
				{script: goldenFileToParticipant, args: []string{testDMAddr, testFile, "SMS", testSeconds}},
			},
		},
		{
			name: "ensure Messages runs",
			send: func(s *Sender) error { return s.EnsureRunning(t.Context()) },
			want: []scriptCall{{script: goldenEnsureMessages, args: nil}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recRunner{results: tt.results}
			if err := tt.send(NewSender(r, testTimeout)); err != nil {
				t.Fatalf("send: %v", err)
			}
			checkCalls(t, r.recorded(), tt.want)
		})
	}
}

// hostileTexts are texts that would do harm if they reached a script's
// source or a shell.
var hostileTexts = []string{
	`"`,
	`\`,
	`\"`,
	`" & do shell script "rm -rf ~" & "`,
	"\" & (do shell script \"touch /tmp/blueline-pwned\") & \"",
	"end tell\nend run\non run argv\ndo shell script \"id\"",
	"line one\nline two\r\nline three\rfour",
	"$(rm -rf ~)",
	"`rm -rf ~`",
	"${HOME}",
	"'single' & 'quotes'",
	"-e",
	"--",
	"«class utf8»",
	"tab\there",
	"emoji 😀 and ünïcödé and 中文 and RTL \u202e",
	"\u2028\u2029",
	strings.Repeat("ten kB of text, with \"quotes\" and \\backslashes\\. ", 10240/48+1)[:10240],
}

func TestSenderHostileTextTravelsInArgv(t *testing.T) {
	for i, text := range hostileTexts {
		t.Run(strconv.Itoa(i), func(t *testing.T) {
			r := &recRunner{results: []error{notFound("chat")}}
			s := NewSender(r, testTimeout)
			if err := s.SendText(t.Context(), testDM, testDMAddr, "imessage", text); err != nil {
				t.Fatalf("send: %v", err)
			}
			checkCalls(t, r.recorded(), []scriptCall{
				{script: goldenTextToChat, args: []string{testDM, text, testSeconds}},
				{script: goldenTextToParticipant, args: []string{testDMAddr, text, "iMessage", testSeconds}},
			})
		})
	}
	t.Run("file path and address", func(t *testing.T) {
		path := "/Users/me/Library/Messages/Attachments/blueline/x/" + `a" & do shell script "id" & ".jpg`
		address := `x" & do shell script "id" & "@example.com`
		guid := "iMessage;-;" + address
		r := &recRunner{results: []error{notFound("chat")}}
		if err := NewSender(r, testTimeout).SendFile(t.Context(), guid, address, "imessage", path); err != nil {
			t.Fatalf("send: %v", err)
		}
		checkCalls(t, r.recorded(), []scriptCall{
			{script: goldenFileToChat, args: []string{guid, path, testSeconds}},
			{script: goldenFileToParticipant, args: []string{address, path, "iMessage", testSeconds}},
		})
	})
}

func TestSenderTimeouts(t *testing.T) {
	for _, tt := range []struct {
		timeout time.Duration
		seconds string
	}{
		{0, "28"}, // the default, 30 s
		{30 * time.Second, "28"},
		{10 * time.Second, "8"},
		{2500 * time.Millisecond, "1"},
		{time.Second, "1"},
	} {
		r := &recRunner{}
		before := time.Now()
		if err := NewSender(r, tt.timeout).SendText(t.Context(), testDM, testDMAddr, "imessage", "x"); err != nil {
			t.Fatal(err)
		}
		calls := r.recorded()
		if got := calls[0].args[2]; got != tt.seconds {
			t.Errorf("timeout %s: script timeout %q, want %q", tt.timeout, got, tt.seconds)
		}
		hard := tt.timeout
		if hard == 0 {
			hard = 30 * time.Second
		}
		if d := calls[0].deadline; d.IsZero() || d.Before(before.Add(hard)) || d.After(time.Now().Add(hard)) {
			t.Errorf("timeout %s: run deadline %v, want %s after the send started", tt.timeout, d, hard)
		}
	}
}

func TestSenderRetryChain(t *testing.T) {
	denied := &ScriptError{ExitCode: 1, Code: -1743,
		Stderr: "0:50: execution error: Not authorized to send Apple events to Messages. (-1743)\n"}
	tests := []struct {
		name      string
		chat      string
		address   string
		results   []error
		runs      int
		permanent bool
		is        error
	}{
		{name: "one-to-one found by participant", chat: testDM, address: testDMAddr,
			results: []error{notFound("chat")}, runs: 2},
		{name: "one-to-one found by neither", chat: testDM, address: testDMAddr,
			results: []error{notFound("chat"), notFound("participant")}, runs: 2, permanent: true, is: ErrChatNotFound},
		{name: "group is not retried", chat: testGroup,
			results: []error{notFound("chat")}, runs: 1, permanent: true, is: ErrChatNotFound},
		{name: "group with an address is not retried", chat: testGroup, address: testDMAddr,
			results: []error{notFound("chat")}, runs: 1, permanent: true, is: ErrChatNotFound},
		{name: "one-to-one without an address is not retried", chat: testDM,
			results: []error{notFound("chat")}, runs: 1, permanent: true, is: ErrChatNotFound},
		{name: "other errors are not retried", chat: testDM, address: testDMAddr,
			results: []error{denied}, runs: 1, permanent: true, is: ErrAutomationDenied},
		{name: "participant form denied", chat: testDM, address: testDMAddr,
			results: []error{notFound("chat"), denied}, runs: 2, permanent: true, is: ErrAutomationDenied},
		{name: "participant form times out", chat: testDM, address: testDMAddr,
			results: []error{notFound("chat"), &ScriptError{ExitCode: 1, Code: -1712, Stderr: "AppleEvent timed out. (-1712)"}},
			runs:    2, is: ErrTimedOut},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recRunner{results: tt.results}
			err := NewSender(r, testTimeout).SendText(t.Context(), tt.chat, tt.address, "imessage", "hi")
			if got := len(r.recorded()); got != tt.runs {
				t.Errorf("%d runs, want %d", got, tt.runs)
			}
			if tt.is == nil {
				if err != nil {
					t.Fatalf("send: %v", err)
				}
				return
			}
			if !errors.Is(err, tt.is) {
				t.Fatalf("err = %v, want %v", err, tt.is)
			}
			if bridge.IsPermanent(err) != tt.permanent {
				t.Errorf("permanent = %v, want %v (err %v)", !tt.permanent, tt.permanent, err)
			}
			var se *ScriptError
			if !errors.As(err, &se) {
				t.Errorf("err %v does not carry the ScriptError", err)
			}
		})
	}
}

func TestSenderAutomationDenied(t *testing.T) {
	for _, code := range []int{-1743, -1744} {
		r := &recRunner{results: []error{&ScriptError{ExitCode: 1, Code: code,
			Stderr: fmt.Sprintf("execution error: Not authorized to send Apple events to Messages. (%d)", code)}}}
		err := NewSender(r, testTimeout).SendText(t.Context(), testDM, testDMAddr, "imessage", "hi")
		if !bridge.IsPermanent(err) || !errors.Is(err, ErrAutomationDenied) {
			t.Fatalf("code %d: err = %v, want a permanent ErrAutomationDenied", code, err)
		}
		for _, want := range []string{"System Settings", "Privacy & Security", "Automation", "Messages"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("code %d: message %q does not mention %q", code, err, want)
			}
		}
	}
}

func TestSenderTransientErrors(t *testing.T) {
	tests := []struct {
		name string
		err  error
		is   error
	}{
		{"osascript killed at the deadline", fmt.Errorf("messages: osascript timed out and was killed: %w", context.DeadlineExceeded), ErrTimedOut},
		{"AppleEvent timed out", &ScriptError{ExitCode: 1, Code: -1712, Stderr: "execution error: Messages got an error: AppleEvent timed out. (-1712)"}, ErrTimedOut},
		{"timed out without a code", &ScriptError{ExitCode: 1, Stderr: "execution error: Messages timed out."}, ErrTimedOut},
		{"unknown script error", &ScriptError{ExitCode: 1, Code: -10000, Stderr: "execution error: whatever (-10000)"}, nil},
		{"no code at all", &ScriptError{ExitCode: 1}, nil},
		{"cannot start", errors.New("exec: no such file"), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recRunner{results: []error{tt.err}}
			err := NewSender(r, testTimeout).SendText(t.Context(), testDM, testDMAddr, "imessage", "hi")
			if err == nil || bridge.IsPermanent(err) {
				t.Fatalf("err = %v, want a transient error", err)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("err = %v, want %v", err, tt.is)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("err = %v does not wrap %v", err, tt.err)
			}
		})
	}
}

func TestSenderTooLongForArgv(t *testing.T) {
	r := &recRunner{results: []error{fmt.Errorf("messages: run osascript: fork/exec: %w", syscall.E2BIG)}}
	err := NewSender(r, testTimeout).SendText(t.Context(), testDM, testDMAddr, "imessage", "long")
	if !bridge.IsPermanent(err) {
		t.Fatalf("err = %v, want permanent", err)
	}
}

// blockRunner blocks until its run's ctx ends.
type blockRunner struct{}

func (blockRunner) Run(ctx context.Context, _ string, _ []string) (string, error) {
	<-ctx.Done()
	return "", fmt.Errorf("messages: osascript timed out and was killed: %w", ctx.Err())
}

func TestSenderHardTimeout(t *testing.T) {
	err := NewSender(blockRunner{}, 50*time.Millisecond).SendText(t.Context(), testDM, testDMAddr, "imessage", "hi")
	if !errors.Is(err, ErrTimedOut) || bridge.IsPermanent(err) {
		t.Fatalf("err = %v, want a transient ErrTimedOut", err)
	}
}

func TestSenderCallerCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r := &cancelRunner{cancel: cancel}
	err := NewSender(r, testTimeout).SendText(ctx, testDM, testDMAddr, "imessage", "hi")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimedOut) || bridge.IsPermanent(err) {
		t.Fatalf("err = %v, want a transient context.Canceled", err)
	}
	if r.runs != 1 {
		t.Errorf("%d runs, want 1: no fallback once the caller gave up", r.runs)
	}
}

// cancelRunner cancels the caller's context and fails like a killed
// osascript whose chat was not found.
type cancelRunner struct {
	cancel func()
	runs   int
}

func (r *cancelRunner) Run(ctx context.Context, _ string, _ []string) (string, error) {
	r.runs++
	r.cancel()
	<-ctx.Done()
	return "", notFound("chat")
}

func TestSenderRefusesBadRequests(t *testing.T) {
	send := func(chat, address, service, text string) func(*Sender) error {
		return func(s *Sender) error { return s.SendText(t.Context(), chat, address, service, text) }
	}
	file := func(chat, address, service, path string) func(*Sender) error {
		return func(s *Sender) error { return s.SendFile(t.Context(), chat, address, service, path) }
	}
	tests := map[string]func(*Sender) error{
		"empty GUID":                     send("", testDMAddr, "imessage", "hi"),
		"GUID without a chat":            send("iMessage;-;", testDMAddr, "imessage", "hi"),
		"GUID without a service":         send("chat123456", testDMAddr, "imessage", "hi"),
		"GUID of no service":             send("Jabber;-;x@example.com", testDMAddr, "imessage", "hi"),
		"GUID with a bad kind":           send("iMessage;*;x", testDMAddr, "imessage", "hi"),
		"GUID with a semicolon":          send("iMessage;-;x;y", testDMAddr, "imessage", "hi"),
		"GUID with a newline":            send("iMessage;-;x\ny", testDMAddr, "imessage", "hi"),
		"GUID with a NUL":                send("iMessage;-;x\x00", testDMAddr, "imessage", "hi"),
		"GUID with a space first":        send(" iMessage;-;x", testDMAddr, "imessage", "hi"),
		"empty service":                  send(testDM, testDMAddr, "", "hi"),
		"service spelled as AppleScript": send(testDM, testDMAddr, "iMessage", "hi"),
		"unknown service":                send(testDM, testDMAddr, "rcs", "hi"),
		"service injection":              send(testDM, testDMAddr, `SMS" & do shell script "id`, "hi"),
		"empty text":                     send(testDM, testDMAddr, "imessage", ""),
		"text with a NUL":                send(testDM, testDMAddr, "imessage", "a\x00b"),
		"address with a NUL":             send(testDM, "+1555\x00", "imessage", "hi"),
		"relative path":                  file(testDM, testDMAddr, "imessage", "photo.jpg"),
		"home-relative path":             file(testDM, testDMAddr, "imessage", "~/photo.jpg"),
		"path with a NUL":                file(testDM, testDMAddr, "imessage", "/tmp/a\x00b"),
		"file with a bad GUID":           file("nope", testDMAddr, "imessage", testFile),
		"file with a bad service":        file(testDM, testDMAddr, "whatsapp", testFile),
	}
	for name, do := range tests {
		t.Run(name, func(t *testing.T) {
			r := &recRunner{}
			err := do(NewSender(r, testTimeout))
			if err == nil || !bridge.IsPermanent(err) {
				t.Fatalf("err = %v, want a permanent error", err)
			}
			if n := len(r.recorded()); n != 0 {
				t.Errorf("%d scripts ran, want none", n)
			}
		})
	}
	for _, guid := range []string{"iMessage;-;+15550102000", "SMS;-;+15550102000", "RCS;-;+15550102000",
		"any;-;+15550102000", "iMessage;+;chat123456789", "iMessage;-;someone@example.com"} {
		if err := NewSender(&recRunner{}, testTimeout).SendText(t.Context(), guid, "", "imessage", "hi"); err != nil {
			t.Errorf("GUID %q refused: %v", guid, err)
		}
	}
}

// gateRunner holds each run until released, and records whether two runs
// ever overlapped.
type gateRunner struct {
	active  atomic.Int32
	overlap atomic.Bool
	started chan string
	release chan struct{}
}

func (r *gateRunner) Run(ctx context.Context, _ string, args []string) (string, error) {
	if r.active.Add(1) > 1 {
		r.overlap.Store(true)
	}
	defer r.active.Add(-1)
	r.started <- args[1]
	<-r.release
	return "", nil
}

// waitQueued waits until n sends wait for their turn.
func waitQueued(t *testing.T, s *Sender, n int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.queued.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d sends queued, want %d", s.queued.Load(), n)
		}
		runtime.Gosched()
	}
}

func TestSenderSerialisesSends(t *testing.T) {
	r := &gateRunner{started: make(chan string), release: make(chan struct{})}
	s := NewSender(r, testTimeout)
	const n = 5
	errs := make(chan error, n)
	go func() { errs <- s.SendText(t.Context(), testDM, testDMAddr, "imessage", "first") }()
	if got := <-r.started; got != "first" {
		t.Fatalf("first run sent %q", got)
	}
	for i := 1; i < n; i++ {
		go func() {
			if i%2 == 0 {
				errs <- s.SendFile(t.Context(), testGroup, "", "imessage", testFile)
			} else {
				errs <- s.SendText(t.Context(), testGroup, "", "imessage", "later")
			}
		}()
	}
	// All the others are waiting for their turn while the first runs.
	waitQueued(t, s, n-1)
	if got := r.active.Load(); got != 1 {
		t.Fatalf("%d runs active while one send holds the turn, want 1", got)
	}
	r.release <- struct{}{}
	for i := 1; i < n; i++ {
		<-r.started
		if got := r.active.Load(); got != 1 {
			t.Fatalf("%d runs active, want 1", got)
		}
		r.release <- struct{}{}
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("send: %v", err)
		}
	}
	if r.overlap.Load() {
		t.Error("two runs overlapped")
	}
}

func TestSenderQueuedSendGivesUp(t *testing.T) {
	r := &gateRunner{started: make(chan string), release: make(chan struct{})}
	s := NewSender(r, testTimeout)
	first := make(chan error, 1)
	go func() { first <- s.SendText(t.Context(), testDM, testDMAddr, "imessage", "first") }()
	<-r.started

	ctx, cancel := context.WithCancel(t.Context())
	second := make(chan error, 1)
	go func() { second <- s.SendText(ctx, testDM, testDMAddr, "imessage", "second") }()
	waitQueued(t, s, 1)
	cancel()
	if err := <-second; !errors.Is(err, context.Canceled) || bridge.IsPermanent(err) {
		t.Errorf("queued send: err = %v, want a transient context.Canceled", err)
	}
	r.release <- struct{}{}
	if err := <-first; err != nil {
		t.Errorf("first send: %v", err)
	}
}

func TestParseScriptErrorCode(t *testing.T) {
	tests := []struct {
		stderr string
		want   int
	}{
		{"0:98: execution error: Messages got an error: Can’t get chat id \"x\". (-1728)\n", -1728},
		{"execution error: Messages got an error: Can't get chat id \"x\". (-1728)", -1728},
		{"execution error: Not authorized to send Apple events to Messages. (-1743)\n", -1743},
		{"execution error: Messages got an error: AppleEvent timed out. (-1712)\r\n", -1712},
		{"warning: something (1)\nexecution error: Messages got an error: (1002)\n", 1002},
		{"execution error: Can't get chat id \"(-1743)\". (-1728)\n", -1728},
		{"execution error: Messages got an error: something (-1728)\nmore text without a code\n", -1728},
		{"syntax error: Expected end of line but found identifier. (-2741)", -2741},
		{"error without a number", 0},
		{"(-1728) at the start, not the end", 0},
		{"", 0},
	}
	for _, tt := range tests {
		if got := parseScriptErrorCode(tt.stderr); got != tt.want {
			t.Errorf("parseScriptErrorCode(%q) = %d, want %d", tt.stderr, got, tt.want)
		}
	}
}

func TestScriptErrorMessage(t *testing.T) {
	e := &ScriptError{ExitCode: 1, Code: -1728, Stderr: "execution error: Can't get chat id \"x\". (-1728)\n"}
	if got, want := e.Error(), `messages: osascript exited with status 1: execution error: Can't get chat id "x". (-1728)`; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

// standIn writes a stand-in osascript: a shell script with body, in a new
// folder it returns too. The folder's path is in $DIR for the body.
func standIn(t *testing.T, body string) (program, dir string) {
	t.Helper()
	if runtime.GOOS == "windows" {
		t.Skip("the stand-in osascript is a shell script")
	}
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip("no /bin/sh")
	}
	dir = t.TempDir()
	if strings.ContainsAny(dir, `'\`) {
		t.Skipf("temporary folder %q cannot be quoted simply", dir)
	}
	program = filepath.Join(dir, "osascript")
	script := "#!/bin/sh\nDIR='" + dir + "'\n" + body + "\n"
	if err := os.WriteFile(program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return program, dir
}

func TestOsascriptStdinAndArgv(t *testing.T) {
	program, dir := standIn(t, `cat > "$DIR/stdin"
printf '%s\0' "$@" > "$DIR/args"
printf 'ran\n'`)
	args := append([]string{testDM, "", "$(touch " + dir + "/pwned)", "`touch " + dir + "/pwned`"}, hostileTexts...)
	out, err := Osascript{Path: program}.Run(t.Context(), goldenTextToChat, args)
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	if out != "ran\n" {
		t.Errorf("stdout = %q", out)
	}
	stdin, err := os.ReadFile(filepath.Join(dir, "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	if string(stdin) != goldenTextToChat {
		t.Errorf("stdin = %q, want the script", stdin)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	want := append([]string{"-"}, args...)
	if !slices.Equal(got, want) {
		t.Errorf("argv differs:\n got %q\nwant %q", got, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "pwned")); err == nil {
		t.Error("an argument was run by a shell")
	}
}

func TestOsascriptScriptError(t *testing.T) {
	program, dir := standIn(t, `cat > /dev/null
cat "$DIR/stderr" >&2
exit "$(cat "$DIR/status")"`)
	tests := []struct {
		stderr string
		status int
		code   int
	}{
		{"0:84: execution error: Messages got an error: Can't get chat id \"x\". (-1728)\n", 1, -1728},
		{"0:50: execution error: Not authorized to send Apple events to Messages. (-1743)\n", 1, -1743},
		{"something else went wrong\n", 3, 0},
	}
	for _, tt := range tests {
		if err := os.WriteFile(filepath.Join(dir, "stderr"), []byte(tt.stderr), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "status"), []byte(strconv.Itoa(tt.status)), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := Osascript{Path: program}.Run(t.Context(), goldenTextToChat, []string{"x", "hi", "28"})
		var se *ScriptError
		if !errors.As(err, &se) {
			t.Fatalf("err = %v, want a *ScriptError", err)
		}
		if se.ExitCode != tt.status || se.Stderr != tt.stderr || se.Code != tt.code {
			t.Errorf("ScriptError = %+v, want exit %d, code %d, stderr %q", se, tt.status, tt.code, tt.stderr)
		}
	}
}

// waitForFile waits until path exists and returns its content.
func waitForFile(t *testing.T, path string) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never appeared", path)
		}
		runtime.Gosched()
	}
}

func checkGone(t *testing.T, pidText string) {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(pidText))
	if err != nil {
		t.Fatalf("pid %q: %v", pidText, err)
	}
	p, err := os.FindProcess(pid)
	if err != nil {
		return
	}
	if err := p.Signal(syscall.Signal(0)); err == nil {
		p.Kill()
		t.Errorf("process %d is still running", pid)
	}
}

func TestOsascriptKillsAHungScriptAtTheDeadline(t *testing.T) {
	program, dir := standIn(t, `echo $$ > "$DIR/pid.tmp" && mv "$DIR/pid.tmp" "$DIR/pid"
exec sleep 600`)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		_, err := Osascript{Path: program}.Run(ctx, goldenTextToChat, []string{"x", "hi", "28"})
		errs <- err
	}()
	var err error
	select {
	case err = <-errs:
	case <-time.After(time.Second + osascriptWaitDelay + 5*time.Second):
		pid := waitForFile(t, filepath.Join(dir, "pid"))
		checkGone(t, pid) // kills it if it is still there
		t.Fatal("Run did not return after the deadline")
	}
	if err == nil || !strings.Contains(err.Error(), "timed out") || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want a timeout wrapping context.DeadlineExceeded", err)
	}
	var se *ScriptError
	if errors.As(err, &se) {
		t.Errorf("err = %v is a ScriptError", err)
	}
	checkGone(t, waitForFile(t, filepath.Join(dir, "pid")))
}

func TestOsascriptCancelled(t *testing.T) {
	program, dir := standIn(t, `echo $$ > "$DIR/pid.tmp" && mv "$DIR/pid.tmp" "$DIR/pid"
exec sleep 600`)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errs := make(chan error, 1)
	go func() {
		_, err := Osascript{Path: program}.Run(ctx, goldenTextToChat, nil)
		errs <- err
	}()
	pid := waitForFile(t, filepath.Join(dir, "pid"))
	cancel()
	err := <-errs
	if err == nil || !strings.Contains(err.Error(), "cancelled") || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a cancellation wrapping context.Canceled", err)
	}
	checkGone(t, pid)
}

func TestOsascriptMissingProgram(t *testing.T) {
	_, err := Osascript{Path: filepath.Join(t.TempDir(), "no-osascript")}.Run(t.Context(), goldenEnsureMessages, nil)
	var se *ScriptError
	if err == nil || errors.As(err, &se) {
		t.Fatalf("err = %v, want a start error", err)
	}
}

// TestSenderThroughOsascript runs the retry chain through a real process:
// the stand-in fails the chat form (three arguments) with -1728 and
// records the participant form (four).
func TestSenderThroughOsascript(t *testing.T) {
	program, dir := standIn(t, `if [ $# -eq 5 ]; then
	cat > "$DIR/stdin"
	printf '%s\0' "$@" > "$DIR/args"
	exit 0
fi
cat > /dev/null
echo "0:84: execution error: Messages got an error: Can't get chat id \"$2\". (-1728)" >&2
exit 1`)
	text := hostileTexts[3] + "\n" + hostileTexts[7]
	s := NewSender(Osascript{Path: program}, 10*time.Second)
	if err := s.SendText(t.Context(), testSMSDM, testDMAddr, "sms", text); err != nil {
		t.Fatalf("send: %v", err)
	}
	stdin, err := os.ReadFile(filepath.Join(dir, "stdin"))
	if err != nil {
		t.Fatal(err)
	}
	if string(stdin) != goldenTextToParticipant {
		t.Errorf("stdin = %q, want the participant script", stdin)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "args"))
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	if want := []string{"-", testDMAddr, text, "SMS", "8"}; !slices.Equal(got, want) {
		t.Errorf("argv = %q, want %q", got, want)
	}

	// A group is not retried: the -1728 comes back as ErrChatNotFound.
	err = s.SendText(t.Context(), testGroup, "", "imessage", "hi")
	var se *ScriptError
	if !errors.Is(err, ErrChatNotFound) || !bridge.IsPermanent(err) || !errors.As(err, &se) || se.Code != -1728 {
		t.Errorf("group send: err = %v, want a permanent ErrChatNotFound with code -1728", err)
	}
}
