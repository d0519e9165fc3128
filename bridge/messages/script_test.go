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
			else if serviceName is "RCS" then
				set targetAccount to 1st account whose service type = RCS
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
			else if serviceName is "RCS" then
				set targetAccount to 1st account whose service type = RCS
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
	goldenPingMessages = `on run argv
	set waitSeconds to (item 1 of argv) as integer
	if application "Messages" is not running then
		error "Messages is not running" number -600
	end if
	tell application "Messages"
		with timeout of waitSeconds seconds
			count of chats
		end timeout
	end tell
end run
`
	goldenQuitMessages = `on run argv
	set waitSeconds to (item 1 of argv) as integer
	if application "Messages" is running then
		try
			with timeout of waitSeconds seconds
				tell application "Messages" to quit
			end timeout
		on error
			do shell script "/usr/bin/killall -KILL Messages || true"
		end try
	end if
	repeat 50 times
		if application "Messages" is not running then exit repeat
		delay 0.1
	end repeat
end run
`
)

const (
	testDM      = "iMessage;-;+15550102000"
	testDMAddr  = "+15550102000"
	testSMSDM   = "SMS;-;+15550102000"
	testAnyDM   = "any;-;+15550102000"
	testGroup   = "iMessage;+;chat123456789"
	testFile    = "/Users/me/Library/Messages/Attachments/blueline/x/photo.jpg"
	testTimeout = 30 * time.Second
	testSeconds = "28" // testTimeout less the margin
	pingSeconds = "8"  // a ping's 10 s less the margin
)

var (
	chatTarget  = Target{ChatGUID: testDM}
	groupTarget = Target{ChatGUID: testGroup}
	imTarget    = Target{Address: testDMAddr, Service: "iMessage"}
	smsTarget   = Target{Address: testDMAddr, Service: "SMS"}
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

// TestSenderScripts checks that each call is exactly one run of the right
// script with the right argv.
func TestSenderScripts(t *testing.T) {
	tests := []struct {
		name string
		send func(s *Sender) error
		want scriptCall
	}{
		{
			name: "text to a chat",
			send: func(s *Sender) error { return s.SendText(t.Context(), chatTarget, "hello") },
			want: scriptCall{script: goldenTextToChat, args: []string{testDM, "hello", testSeconds}},
		},
		{
			name: "text to an SMS chat",
			send: func(s *Sender) error { return s.SendText(t.Context(), Target{ChatGUID: testSMSDM}, "hello") },
			want: scriptCall{script: goldenTextToChat, args: []string{testSMSDM, "hello", testSeconds}},
		},
		{
			name: "text to a chat stored as any;",
			send: func(s *Sender) error { return s.SendText(t.Context(), Target{ChatGUID: testAnyDM}, "hello") },
			want: scriptCall{script: goldenTextToChat, args: []string{testAnyDM, "hello", testSeconds}},
		},
		{
			name: "text to a group",
			send: func(s *Sender) error { return s.SendText(t.Context(), groupTarget, "hello all") },
			want: scriptCall{script: goldenTextToChat, args: []string{testGroup, "hello all", testSeconds}},
		},
		{
			name: "a chat GUID wins over an address",
			send: func(s *Sender) error {
				return s.SendText(t.Context(), Target{ChatGUID: testDM, Address: testDMAddr, Service: "SMS"}, "hello")
			},
			want: scriptCall{script: goldenTextToChat, args: []string{testDM, "hello", testSeconds}},
		},
		{
			name: "text to an iMessage participant",
			send: func(s *Sender) error { return s.SendText(t.Context(), imTarget, "hello") },
			want: scriptCall{script: goldenTextToParticipant, args: []string{testDMAddr, "hello", "iMessage", testSeconds}},
		},
		{
			name: "text to an SMS participant",
			send: func(s *Sender) error { return s.SendText(t.Context(), smsTarget, "hello") },
			want: scriptCall{script: goldenTextToParticipant, args: []string{testDMAddr, "hello", "SMS", testSeconds}},
		},
		{
			name: "file to a chat",
			send: func(s *Sender) error { return s.SendFile(t.Context(), groupTarget, testFile) },
			want: scriptCall{script: goldenFileToChat, args: []string{testGroup, testFile, testSeconds}},
		},
		{
			name: "file to an iMessage participant",
			send: func(s *Sender) error { return s.SendFile(t.Context(), imTarget, testFile) },
			want: scriptCall{script: goldenFileToParticipant, args: []string{testDMAddr, testFile, "iMessage", testSeconds}},
		},
		{
			name: "file to an SMS participant",
			send: func(s *Sender) error { return s.SendFile(t.Context(), smsTarget, testFile) },
			want: scriptCall{script: goldenFileToParticipant, args: []string{testDMAddr, testFile, "SMS", testSeconds}},
		},
		{
			name: "ensure Messages runs",
			send: func(s *Sender) error { return s.EnsureRunning(t.Context()) },
			want: scriptCall{script: goldenEnsureMessages, args: nil},
		},
		{
			name: "ping Messages",
			send: func(s *Sender) error { return s.Ping(t.Context()) },
			want: scriptCall{script: goldenPingMessages, args: []string{pingSeconds}},
		},
		{
			name: "quit Messages",
			send: func(s *Sender) error { return s.Quit(t.Context()) },
			want: scriptCall{script: goldenQuitMessages, args: []string{testSeconds}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &recRunner{}
			if err := tt.send(NewSender(r, testTimeout)); err != nil {
				t.Fatalf("send: %v", err)
			}
			checkCalls(t, r.recorded(), []scriptCall{tt.want})
		})
	}
}

// TestSenderNoFallback checks that the Sender itself never falls back from
// a chat GUID to the participant: that is the bridge's choice.
func TestSenderNoFallback(t *testing.T) {
	r := &recRunner{results: []error{notFound(`chat id "` + testDM + `"`)}}
	err := NewSender(r, testTimeout).SendText(t.Context(), Target{ChatGUID: testDM, Address: testDMAddr, Service: "iMessage"}, "hi")
	if !errors.Is(err, ErrChatNotFound) {
		t.Fatalf("err = %v, want ErrChatNotFound", err)
	}
	checkCalls(t, r.recorded(), []scriptCall{{script: goldenTextToChat, args: []string{testDM, "hi", testSeconds}}})
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
		t.Run(strconv.Itoa(i)+"/chat", func(t *testing.T) {
			r := &recRunner{}
			if err := NewSender(r, testTimeout).SendText(t.Context(), chatTarget, text); err != nil {
				t.Fatalf("send: %v", err)
			}
			checkCalls(t, r.recorded(), []scriptCall{
				{script: goldenTextToChat, args: []string{testDM, text, testSeconds}},
			})
		})
		t.Run(strconv.Itoa(i)+"/participant", func(t *testing.T) {
			r := &recRunner{}
			if err := NewSender(r, testTimeout).SendText(t.Context(), imTarget, text); err != nil {
				t.Fatalf("send: %v", err)
			}
			checkCalls(t, r.recorded(), []scriptCall{
				{script: goldenTextToParticipant, args: []string{testDMAddr, text, "iMessage", testSeconds}},
			})
		})
	}
	path := "/Users/me/Library/Messages/Attachments/blueline/x/" + `a" & do shell script "id" & ".jpg`
	address := `x" & do shell script "id" & "@example.com`
	guid := "iMessage;-;" + address
	t.Run("file path and GUID", func(t *testing.T) {
		r := &recRunner{}
		if err := NewSender(r, testTimeout).SendFile(t.Context(), Target{ChatGUID: guid}, path); err != nil {
			t.Fatalf("send: %v", err)
		}
		checkCalls(t, r.recorded(), []scriptCall{
			{script: goldenFileToChat, args: []string{guid, path, testSeconds}},
		})
	})
	t.Run("file path and address", func(t *testing.T) {
		r := &recRunner{}
		if err := NewSender(r, testTimeout).SendFile(t.Context(), Target{Address: address, Service: "SMS"}, path); err != nil {
			t.Fatalf("send: %v", err)
		}
		checkCalls(t, r.recorded(), []scriptCall{
			{script: goldenFileToParticipant, args: []string{address, path, "SMS", testSeconds}},
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
		for _, c := range []struct {
			name string
			run  func(s *Sender) error
			arg  int // where the script's timeout is in argv
		}{
			{"chat", func(s *Sender) error { return s.SendText(t.Context(), chatTarget, "x") }, 2},
			{"participant", func(s *Sender) error { return s.SendFile(t.Context(), smsTarget, testFile) }, 3},
			{"ping", func(s *Sender) error { return s.Ping(t.Context()) }, 0},
			{"quit", func(s *Sender) error { return s.Quit(t.Context()) }, 0},
		} {
			hard := tt.timeout
			if hard == 0 {
				hard = 30 * time.Second
			}
			seconds := tt.seconds
			if c.name == "ping" && hard > 10*time.Second {
				// A ping has 10 s at most, less the margin.
				hard, seconds = 10*time.Second, "8"
			}
			r := &recRunner{}
			before := time.Now()
			if err := c.run(NewSender(r, tt.timeout)); err != nil {
				t.Fatal(err)
			}
			calls := r.recorded()
			if len(calls) != 1 {
				t.Fatalf("timeout %s, %s: %d runs, want 1", tt.timeout, c.name, len(calls))
			}
			if got := calls[0].args[c.arg]; got != seconds {
				t.Errorf("timeout %s, %s: script timeout %q, want %q", tt.timeout, c.name, got, seconds)
			}
			if d := calls[0].deadline; d.IsZero() || d.Before(before.Add(hard)) || d.After(time.Now().Add(hard)) {
				t.Errorf("timeout %s, %s: run deadline %v, want %s after the send started", tt.timeout, c.name, d, hard)
			}
		}
	}
}

// TestSenderClassification checks what one failed run becomes: which
// error it wraps, whether it is permanent, and whether it certainly sent
// nothing.
func TestSenderClassification(t *testing.T) {
	scriptErr := func(code int, msg string) *ScriptError {
		return &ScriptError{ExitCode: 1, Code: code, Stderr: fmt.Sprintf("0:50: execution error: %s (%d)\n", msg, code)}
	}
	tests := []struct {
		name      string
		err       error // what the run returns
		is        error // what the Sender's error wraps; nil: none of ours
		permanent bool
		notSent   bool // certainlyNotSent
	}{
		{name: "no such chat", err: notFound(`chat id "x"`), is: ErrChatNotFound, notSent: true},
		{name: "Messages not running", err: scriptErr(-600, "Application isn’t running."), is: ErrNotRunning, notSent: true},
		{name: "Automation not permitted", err: scriptErr(-1743, "Not authorized to send Apple events to Messages."),
			is: ErrAutomationDenied, permanent: true, notSent: true},
		{name: "Automation needs consent", err: scriptErr(-1744, "Not authorized to send Apple events to Messages."),
			is: ErrAutomationDenied, permanent: true, notSent: true},
		{name: "bad argument", err: scriptErr(-1700, "unsupported service"), permanent: true, notSent: true},
		{name: "missing argument", err: scriptErr(-1701, "Can’t get item 3 of {}."), permanent: true, notSent: true},
		{name: "syntax error", err: &ScriptError{ExitCode: 1, Code: -2740, Stderr: "syntax error: A identifier can’t go after this identifier. (-2740)"},
			permanent: true, notSent: true},
		{name: "syntax error, unknown token", err: &ScriptError{ExitCode: 1, Code: -2741, Stderr: "syntax error: Expected end of line but found identifier. (-2741)"},
			permanent: true, notSent: true},
		{name: "AppleEvent timed out", err: scriptErr(-1712, "Messages got an error: AppleEvent timed out."), is: ErrTimedOut},
		{name: "connection invalid", err: scriptErr(-609, "Connection is invalid."), is: ErrTimedOut},
		{name: "timed out without a code", err: &ScriptError{ExitCode: 1, Stderr: "execution error: Messages timed out."}, is: ErrTimedOut},
		{name: "osascript killed at the deadline", err: fmt.Errorf("messages: osascript timed out and was killed: %w", context.DeadlineExceeded), is: ErrTimedOut},
		{name: "too long for argv", err: fmt.Errorf("messages: run osascript: fork/exec: %w", syscall.E2BIG), permanent: true, notSent: true},
		{name: "unknown script error", err: scriptErr(-10000, "whatever")},
		{name: "no code at all", err: &ScriptError{ExitCode: 1}},
		{name: "osascript not started", err: fmt.Errorf("%w: %w", ErrNotStarted, errors.New("fork/exec /usr/bin/osascript: no such file or directory")),
			is: ErrNotStarted, notSent: true},
		{name: "some other run error", err: errors.New("messages: run osascript: something odd")},
	}
	targets := []struct {
		name string
		t    Target
	}{{"chat", chatTarget}, {"group", groupTarget}, {"participant", smsTarget}}
	for _, tt := range tests {
		for _, tg := range targets {
			t.Run(tt.name+"/"+tg.name, func(t *testing.T) {
				r := &recRunner{results: []error{tt.err}}
				err := NewSender(r, testTimeout).SendText(t.Context(), tg.t, "hi")
				if n := len(r.recorded()); n != 1 {
					t.Errorf("%d runs, want exactly 1", n)
				}
				if err == nil {
					t.Fatal("no error")
				}
				if !errors.Is(err, tt.err) {
					t.Errorf("err = %v does not wrap the run's error %v", err, tt.err)
				}
				if tt.is != nil && !errors.Is(err, tt.is) {
					t.Errorf("err = %v, want %v", err, tt.is)
				}
				for _, other := range []error{ErrChatNotFound, ErrNotRunning, ErrAutomationDenied, ErrTimedOut, ErrNotStarted} {
					if other != tt.is && errors.Is(err, other) {
						t.Errorf("err = %v wraps %v too", err, other)
					}
				}
				if got := bridge.IsPermanent(err); got != tt.permanent {
					t.Errorf("permanent = %v, want %v (err %v)", got, tt.permanent, err)
				}
				if got := certainlyNotSent(err); got != tt.notSent {
					t.Errorf("certainlyNotSent = %v, want %v (err %v)", got, tt.notSent, err)
				}
				var se *ScriptError
				if want := errors.As(tt.err, &se); want && !errors.As(err, &se) {
					t.Errorf("err %v does not carry the ScriptError", err)
				}
				if errors.Is(err, ErrChatNotFound) && !strings.Contains(err.Error(), tg.t.String()) {
					t.Errorf("err %q does not name the target %q", err, tg.t.String())
				}
			})
		}
	}
	// Ping, Quit and EnsureRunning are classified alike.
	for name, call := range map[string]func(*Sender) error{
		"ping":   func(s *Sender) error { return s.Ping(t.Context()) },
		"quit":   func(s *Sender) error { return s.Quit(t.Context()) },
		"ensure": func(s *Sender) error { return s.EnsureRunning(t.Context()) },
	} {
		r := &recRunner{results: []error{scriptErr(-600, "Messages is not running")}}
		if err := call(NewSender(r, testTimeout)); !errors.Is(err, ErrNotRunning) || !certainlyNotSent(err) {
			t.Errorf("%s: err = %v, want ErrNotRunning", name, err)
		}
		r = &recRunner{results: []error{scriptErr(-1712, "AppleEvent timed out.")}}
		if err := call(NewSender(r, testTimeout)); !errors.Is(err, ErrTimedOut) || certainlyNotSent(err) {
			t.Errorf("%s: err = %v, want ErrTimedOut", name, err)
		}
	}
}

func TestCertainlyNotSent(t *testing.T) {
	if certainlyNotSent(nil) {
		t.Error("certainlyNotSent(nil)")
	}
	for _, err := range []error{ErrChatNotFound, ErrNotRunning, ErrNotStarted, ErrAutomationDenied,
		fmt.Errorf("wrapped: %w", ErrNotStarted), bridge.Permanent(fmt.Errorf("x: %w", ErrAutomationDenied))} {
		if !certainlyNotSent(err) {
			t.Errorf("certainlyNotSent(%v) = false", err)
		}
	}
	for _, err := range []error{ErrTimedOut, context.DeadlineExceeded, context.Canceled, errors.New("other"),
		&ScriptError{ExitCode: 1, Code: -1728}} {
		if certainlyNotSent(err) {
			t.Errorf("certainlyNotSent(%v) = true", err)
		}
	}
	// A send refused before any run reached nothing.
	r := &recRunner{}
	s := NewSender(r, testTimeout)
	for _, err := range []error{
		s.SendText(t.Context(), Target{ChatGUID: "iMessage;-;"}, "hi"),
		s.SendText(t.Context(), chatTarget, ""),
		s.SendFile(t.Context(), chatTarget, "relative/path"),
		s.SendText(t.Context(), Target{Address: "+15550001111", Service: "Fax"}, "hi"),
	} {
		if !certainlyNotSent(err) || !bridge.IsPermanent(err) {
			t.Errorf("refused before running: %v: certainlyNotSent %v, permanent %v", err, certainlyNotSent(err), bridge.IsPermanent(err))
		}
	}
	if n := len(r.recorded()); n != 0 {
		t.Errorf("%d runs for refused sends", n)
	}
}

func TestSenderAutomationDenied(t *testing.T) {
	for _, code := range []int{-1743, -1744} {
		r := &recRunner{results: []error{&ScriptError{ExitCode: 1, Code: code,
			Stderr: fmt.Sprintf("execution error: Not authorized to send Apple events to Messages. (%d)", code)}}}
		err := NewSender(r, testTimeout).SendText(t.Context(), chatTarget, "hi")
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

// blockRunner blocks until its run's ctx ends.
type blockRunner struct{}

func (blockRunner) Run(ctx context.Context, _ string, _ []string) (string, error) {
	<-ctx.Done()
	return "", fmt.Errorf("messages: osascript timed out and was killed: %w", ctx.Err())
}

func TestSenderHardTimeout(t *testing.T) {
	s := NewSender(blockRunner{}, 50*time.Millisecond)
	for name, call := range map[string]func() error{
		"chat":        func() error { return s.SendText(t.Context(), chatTarget, "hi") },
		"participant": func() error { return s.SendFile(t.Context(), imTarget, testFile) },
		"ping":        func() error { return s.Ping(t.Context()) },
	} {
		err := call()
		if !errors.Is(err, ErrTimedOut) || bridge.IsPermanent(err) || certainlyNotSent(err) {
			t.Errorf("%s: err = %v, want a transient ErrTimedOut of unknown outcome", name, err)
		}
	}
}

func TestSenderCallerCancels(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r := &cancelRunner{cancel: cancel}
	err := NewSender(r, testTimeout).SendText(ctx, chatTarget, "hi")
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimedOut) || bridge.IsPermanent(err) {
		t.Fatalf("err = %v, want a transient context.Canceled", err)
	}
	if r.runs != 1 {
		t.Errorf("%d runs, want 1", r.runs)
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
	send := func(target Target, text string) func(*Sender) error {
		return func(s *Sender) error { return s.SendText(t.Context(), target, text) }
	}
	file := func(target Target, path string) func(*Sender) error {
		return func(s *Sender) error { return s.SendFile(t.Context(), target, path) }
	}
	chat := func(guid string) Target { return Target{ChatGUID: guid} }
	part := func(address, service string) Target { return Target{Address: address, Service: service} }
	tests := map[string]func(*Sender) error{
		"no target at all":               send(Target{}, "hi"),
		"GUID without a chat":            send(chat("iMessage;-;"), "hi"),
		"GUID without a service":         send(chat("chat123456"), "hi"),
		"GUID of no service":             send(chat("Jabber;-;x@example.com"), "hi"),
		"GUID with a bad kind":           send(chat("iMessage;*;x"), "hi"),
		"GUID with a semicolon":          send(chat("iMessage;-;x;y"), "hi"),
		"GUID with a newline":            send(chat("iMessage;-;x\ny"), "hi"),
		"GUID with a NUL":                send(chat("iMessage;-;x\x00"), "hi"),
		"GUID with a space first":        send(chat(" iMessage;-;x"), "hi"),
		"GUID with a bad address too":    send(Target{ChatGUID: "nope", Address: testDMAddr, Service: "iMessage"}, "hi"),
		"participant without address":    send(part("", "iMessage"), "hi"),
		"participant address with a NUL": send(part("+1555\x00", "iMessage"), "hi"),
		"participant without service":    send(part(testDMAddr, ""), "hi"),
		"service spelled as ours":        send(part(testDMAddr, "imessage"), "hi"),
		"sms spelled as ours":            send(part(testDMAddr, "sms"), "hi"),
		"any service":                    send(part(testDMAddr, "any"), "hi"),
		"service injection":              send(part(testDMAddr, `SMS" & do shell script "id`), "hi"),
		"empty text":                     send(chatTarget, ""),
		"empty text to a participant":    send(imTarget, ""),
		"text with a NUL":                send(chatTarget, "a\x00b"),
		"relative path":                  file(chatTarget, "photo.jpg"),
		"home-relative path":             file(chatTarget, "~/photo.jpg"),
		"path with a NUL":                file(imTarget, "/tmp/a\x00b"),
		"file with a bad GUID":           file(chat("nope"), testFile),
		"file with a bad service":        file(part(testDMAddr, "whatsapp"), testFile),
		"file without address":           file(part("", "SMS"), testFile),
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
		"any;-;+15550102000", "any;+;chat123456789", "iMessage;+;chat123456789", "iMessage;-;someone@example.com"} {
		if err := NewSender(&recRunner{}, testTimeout).SendText(t.Context(), chat(guid), "hi"); err != nil {
			t.Errorf("GUID %q refused: %v", guid, err)
		}
	}
	for _, target := range []Target{imTarget, smsTarget, part("someone@example.com", "iMessage")} {
		if err := NewSender(&recRunner{}, testTimeout).SendText(t.Context(), target, "hi"); err != nil {
			t.Errorf("target %v refused: %v", target, err)
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
	what := "a script without text"
	if len(args) > 1 {
		what = args[1]
	}
	r.started <- what
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
	go func() { errs <- s.SendText(t.Context(), chatTarget, "first") }()
	if got := <-r.started; got != "first" {
		t.Fatalf("first run sent %q", got)
	}
	for i := 1; i < n; i++ {
		go func() {
			switch i % 4 {
			case 0:
				errs <- s.SendFile(t.Context(), groupTarget, testFile)
			case 1:
				errs <- s.SendText(t.Context(), smsTarget, "later")
			case 2:
				errs <- s.Ping(t.Context())
			case 3:
				errs <- s.Quit(t.Context())
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
	go func() { first <- s.SendText(t.Context(), chatTarget, "first") }()
	<-r.started

	ctx, cancel := context.WithCancel(t.Context())
	second := make(chan error, 1)
	go func() { second <- s.SendText(ctx, imTarget, "second") }()
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
	missing := filepath.Join(t.TempDir(), "no-osascript")
	_, err := Osascript{Path: missing}.Run(t.Context(), goldenEnsureMessages, nil)
	var se *ScriptError
	if err == nil || errors.As(err, &se) || !errors.Is(err, ErrNotStarted) {
		t.Fatalf("err = %v, want a start error wrapping ErrNotStarted", err)
	}
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("err = %v does not wrap the cause (no such file)", err)
	}
	// Through the Sender: nothing was sent.
	err = NewSender(Osascript{Path: missing}, testTimeout).SendText(t.Context(), chatTarget, "hi")
	if !errors.Is(err, ErrNotStarted) || !certainlyNotSent(err) || errors.Is(err, ErrTimedOut) {
		t.Errorf("send: err = %v, want ErrNotStarted, certainly not sent", err)
	}
	// A program that exists but cannot be executed.
	program, _ := standIn(t, "exit 0")
	if err := os.Chmod(program, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := (Osascript{Path: program}).Run(t.Context(), goldenEnsureMessages, nil); !errors.Is(err, ErrNotStarted) {
		t.Errorf("not executable: err = %v, want ErrNotStarted", err)
	}
}

// TestSenderThroughOsascript runs sends through a real process: the
// stand-in fails the chat form (three arguments) with -1728, records the
// participant form (four) and answers a ping (one).
func TestSenderThroughOsascript(t *testing.T) {
	program, dir := standIn(t, `case $# in
5)
	cat > "$DIR/stdin"
	printf '%s\0' "$@" > "$DIR/args"
	echo x >> "$DIR/runs"
	exit 0;;
2)
	cat > "$DIR/ping"
	printf '%s\0' "$@" > "$DIR/pingargs"
	echo Messages
	exit 0;;
esac
cat > /dev/null
echo x >> "$DIR/runs"
echo "0:84: execution error: Messages got an error: Can't get chat id \"$2\". (-1728)" >&2
exit 1`)
	text := hostileTexts[3] + "\n" + hostileTexts[7]
	s := NewSender(Osascript{Path: program}, 10*time.Second)
	runs := func() int {
		b, _ := os.ReadFile(filepath.Join(dir, "runs"))
		return strings.Count(string(b), "x")
	}

	// The chat form: the -1728 comes back as ErrChatNotFound, with no
	// fallback (that is the bridge's).
	err := s.SendText(t.Context(), Target{ChatGUID: testSMSDM}, text)
	var se *ScriptError
	if !errors.Is(err, ErrChatNotFound) || bridge.IsPermanent(err) || !certainlyNotSent(err) || !errors.As(err, &se) || se.Code != -1728 {
		t.Errorf("chat send: err = %v, want a transient ErrChatNotFound with code -1728", err)
	}
	if n := runs(); n != 1 {
		t.Errorf("chat send: %d runs, want 1", n)
	}

	// The participant form.
	if err := s.SendText(t.Context(), smsTarget, text); err != nil {
		t.Fatalf("participant send: %v", err)
	}
	if n := runs(); n != 2 {
		t.Errorf("after the participant send: %d runs, want 2", n)
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

	// A ping.
	if err := s.Ping(t.Context()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	stdin, err = os.ReadFile(filepath.Join(dir, "ping"))
	if err != nil {
		t.Fatal(err)
	}
	if string(stdin) != goldenPingMessages {
		t.Errorf("ping stdin = %q, want the ping script", stdin)
	}
	raw, err = os.ReadFile(filepath.Join(dir, "pingargs"))
	if err != nil {
		t.Fatal(err)
	}
	got = strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
	if want := []string{"-", "8"}; !slices.Equal(got, want) {
		t.Errorf("ping argv = %q, want %q", got, want)
	}
}
