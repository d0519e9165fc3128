package messages

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/blueline-app/blueline/bridge"
)

// The AppleScript Blueline runs. These constants are the only AppleScript
// text in the program: what changes from one send to the next (chat GUID,
// text, file path, address, service, timeout) reaches a script only as an
// item of argv, never as part of its source, so no text can change what a
// script does.
const (
	// sendTextToChatScript sends text to an existing chat by its GUID.
	// argv: chat GUID, text, timeout in seconds.
	sendTextToChatScript = `on run argv
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

	// sendTextToParticipantScript sends text to a contact of the iMessage
	// or SMS account (macOS 13 and later): the fallback for a one-to-one
	// chat that Messages cannot find by GUID, and how a new one starts.
	// argv: address, text, "iMessage" or "SMS", timeout in seconds.
	sendTextToParticipantScript = `on run argv
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

	// sendFileToChatScript sends a file to an existing chat by its GUID.
	// argv: chat GUID, absolute POSIX path, timeout in seconds.
	sendFileToChatScript = `on run argv
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

	// sendFileToParticipantScript sends a file to a contact of the
	// iMessage or SMS account (macOS 13 and later).
	// argv: address, absolute POSIX path, "iMessage" or "SMS", timeout in
	// seconds.
	sendFileToParticipantScript = `on run argv
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

	// ensureMessagesScript starts Messages in the background if it is not
	// running. argv: none.
	ensureMessagesScript = `on run argv
	if application "Messages" is not running then
		launch application "Messages"
	end if
end run
`

	// pingMessagesScript asks Messages how many chats it has: something
	// Messages itself must answer. (An application's name, version, id
	// and running are answered by AppleScript without an event reaching
	// the application, so a hung Messages would "answer" them.)
	// argv: timeout in seconds.
	pingMessagesScript = `on run argv
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

	// quitMessagesScript quits Messages, killing it when it does not quit
	// within the timeout (a hung Messages does not), and waits until it is
	// gone. argv: timeout in seconds.
	quitMessagesScript = `on run argv
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

// Runner runs an AppleScript. The real one execs osascript; tests
// substitute a fake at this boundary only.
type Runner interface {
	Run(ctx context.Context, script string, args []string) (stdout string, err error)
}

// DefaultOsascript is where macOS keeps osascript.
const DefaultOsascript = "/usr/bin/osascript"

// osascriptWaitDelay bounds how long Run waits for osascript's output pipes
// once the process has been killed or has exited.
const osascriptWaitDelay = 2 * time.Second

// Osascript runs scripts with the osascript program: `<Path> - <args...>`,
// without a shell, the script on stdin and the arguments as the script's
// argv (read with `on run argv`).
type Osascript struct {
	Path string // the program; "" is DefaultOsascript
}

// Run runs script with args. When ctx ends first (a hung Messages), the
// process is killed and the error says it timed out (or was cancelled) and
// wraps ctx's error. A non-zero exit returns a *ScriptError.
func (o Osascript) Run(ctx context.Context, script string, args []string) (string, error) {
	path := o.Path
	if path == "" {
		path = DefaultOsascript
	}
	cmd := exec.CommandContext(ctx, path, append([]string{"-"}, args...)...)
	cmd.Stdin = strings.NewReader(script)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// Kill, not interrupt: a hung osascript waits on Messages and would
	// ignore a polite signal. WaitDelay makes Wait return even if
	// something else still holds the output pipes.
	cmd.Cancel = func() error { return cmd.Process.Kill() }
	cmd.WaitDelay = osascriptWaitDelay
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("%w: %w", ErrNotStarted, err)
	}
	err := cmd.Wait()
	if err == nil {
		return stdout.String(), nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		how := "was cancelled"
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			how = "timed out"
		}
		return stdout.String(), fmt.Errorf("messages: osascript %s and was killed: %w", how, ctxErr)
	}
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return stdout.String(), &ScriptError{
			ExitCode: exitErr.ExitCode(),
			Stderr:   stderr.String(),
			Code:     parseScriptErrorCode(stderr.String()),
		}
	}
	return stdout.String(), fmt.Errorf("messages: run osascript: %w", err)
}

// ScriptError is a script that failed: osascript exited non-zero.
type ScriptError struct {
	ExitCode int
	Stderr   string
	// Code is the AppleScript error number at the end of osascript's
	// message ("… (-1728)"); 0 if there is none.
	Code int
}

func (e *ScriptError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > 1000 {
		cut := 1000
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut] + "…"
	}
	if msg == "" {
		msg = "no message"
	}
	return fmt.Sprintf("messages: osascript exited with status %d: %s", e.ExitCode, msg)
}

// scriptErrorCode matches the error number osascript puts at the end of
// an execution error: "… Can't get chat id \"x\". (-1728)".
var scriptErrorCode = regexp.MustCompile(`\((-?[0-9]+)\)\s*$`)

// parseScriptErrorCode returns the AppleScript error number in osascript's
// stderr, from its last line that ends with one; 0 if none does.
func parseScriptErrorCode(stderr string) int {
	lines := strings.Split(stderr, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		m := scriptErrorCode.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if n, err := strconv.Atoi(m[1]); err == nil {
			return n
		}
	}
	return 0
}

// AppleScript error numbers the Sender acts on.
const (
	scriptErrNotFound      = -1728 // errAENoSuchObject: no such chat or participant
	scriptErrTimedOut      = -1712 // errAETimeout: Messages did not answer in time
	scriptErrNotPermitted  = -1743 // errAEEventNotPermitted: Automation not allowed
	scriptErrNeedsUserOK   = -1744 // errAEEventWouldRequireUserConsent: the prompt cannot be shown
	scriptErrNotRunning    = -600  // procNotFound: the application is not running
	scriptErrConnInvalid   = -609  // connectionInvalid: Messages quit or crashed during the event
	scriptErrParam         = -1700 // errAECoercionFail: a bad argument (our own "unsupported service")
	scriptErrParamMissing  = -1701 // errAEDescNotFound: a missing argument
	scriptErrSyntax        = -2740 // a script that does not compile
	scriptErrSyntaxUnknown = -2741 // a script that does not compile
)

const (
	defaultSendTimeout = 30 * time.Second
	// scriptTimeoutMargin is how much sooner than the process is killed
	// the script's own `with timeout` fires, so that a busy Messages
	// yields AppleScript's clean timeout error rather than a kill. The
	// script's timeout is at least a second.
	scriptTimeoutMargin = 2 * time.Second
)

var (
	// ErrAutomationDenied is macOS refusing the daemon Apple events to
	// Messages. It is permanent until the user allows it.
	ErrAutomationDenied = errors.New("messages: macOS does not let Blueline control Messages (Automation permission): " +
		"open System Settings → Privacy & Security → Automation, find the program that runs the Blueline daemon " +
		"and switch Messages on; if it is not listed, send once from that same program in a logged-in session to get the prompt")
	// ErrTimedOut is Messages not answering in time (busy, or hung: a
	// restart of Messages may help). Worth retrying.
	ErrTimedOut = errors.New("messages: Messages did not answer in time")
	// ErrChatNotFound is Messages not knowing the chat (or participant) a
	// script addressed (-1728): nothing was sent.
	ErrChatNotFound = errors.New("messages: Messages has no such chat")
	// ErrNotRunning is Messages not running (-600): nothing was sent.
	ErrNotRunning = errors.New("messages: Messages is not running")
	// ErrNotStarted is osascript failing to start: nothing was sent.
	ErrNotStarted = errors.New("messages: osascript could not be started")
	// errRefused is a send refused before it did anything (a bad
	// argument, a script that does not compile): nothing was sent.
	errRefused = errors.New("messages: refused")
)

// certainlyNotSent reports whether a script's error (as returned by the
// Sender) means Messages did not take the send: only then may it be tried
// again. A timeout, a crash of Messages mid-send or an unknown error leaves
// the outcome unknown.
func certainlyNotSent(err error) bool {
	for _, e := range []error{ErrChatNotFound, ErrNotRunning, ErrNotStarted, ErrAutomationDenied, errRefused, errTooLong} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

var errTooLong = errors.New("messages: too long to pass to osascript")

// chatGUIDPattern is the shape of a Messages chat GUID: service, "-" for
// one-to-one or "+" for a group, and the chat's identifier (no ";" and no
// control characters).
var chatGUIDPattern = regexp.MustCompile(`^(iMessage|SMS|RCS|any);[-+];[^;\x00-\x1f\x7f]+$`)

// checkChatGUID refuses a chat GUID that is not of Messages' shape.
func checkChatGUID(guid string) error {
	if !chatGUIDPattern.MatchString(guid) {
		return bridge.Permanent(fmt.Errorf("%w: invalid chat GUID %q", errRefused, guid))
	}
	return nil
}

// accountService maps our service names to the service types the
// participant scripts match (RCS is macOS 15 and later's).
func accountService(service string) (string, error) {
	switch service {
	case "imessage":
		return "iMessage", nil
	case "sms":
		return "SMS", nil
	case "rcs":
		return "RCS", nil
	}
	return "", bridge.Permanent(fmt.Errorf("messages: unknown service %q (want imessage, sms or rcs)", service))
}

// Target is where one send goes: the chat with ChatGUID, or, when ChatGUID
// is "", the participant Address of the account of Service ("iMessage" or
// "SMS").
type Target struct {
	ChatGUID string
	Address  string
	Service  string
}

func (t Target) String() string {
	if t.ChatGUID != "" {
		return "chat " + t.ChatGUID
	}
	return "participant " + t.Address + " of " + t.Service
}

// Sender runs the scripts of one line through a Runner, one at a time:
// Messages cannot take two at once, and a send's outcome is recognised as
// the next outgoing row of its chat.
//
// Each send is one osascript run to one Target; the bridge chooses the
// targets and what to do on failure. Errors wrap ErrChatNotFound,
// ErrNotRunning, ErrAutomationDenied (permanent), ErrTimedOut, or others;
// certainlyNotSent tells those after which nothing was sent.
type Sender struct {
	runner  Runner
	timeout time.Duration
	// turn holds a token while a script runs; waiting for it honours ctx.
	turn chan struct{}
	// queued counts sends waiting for their turn (for tests).
	queued atomic.Int32
	// health is what the scripts' outcomes say of Automation and Messages.
	health healthState
}

// NewSender returns a Sender that gives each osascript run timeout before
// killing it (0: 30 s). The scripts' own AppleScript timeout is set a
// little shorter.
func NewSender(r Runner, timeout time.Duration) *Sender {
	if timeout <= 0 {
		timeout = defaultSendTimeout
	}
	return &Sender{runner: r, timeout: timeout, turn: make(chan struct{}, 1)}
}

// scriptSeconds is the argv item for a script's `with timeout`.
func (s *Sender) scriptSeconds() string {
	secs := int((s.timeout - scriptTimeoutMargin) / time.Second)
	secs = max(secs, 1)
	return strconv.Itoa(secs)
}

// SendText sends text to t.
func (s *Sender) SendText(ctx context.Context, t Target, text string) error {
	if err := checkTarget(t); err != nil {
		return err
	}
	if text == "" {
		return bridge.Permanent(fmt.Errorf("%w: empty text", errRefused))
	}
	if strings.ContainsRune(text, 0) {
		return bridge.Permanent(fmt.Errorf("%w: text contains a NUL character", errRefused))
	}
	secs := s.scriptSeconds()
	if t.ChatGUID != "" {
		return s.script(ctx, t.String(), sendTextToChatScript, t.ChatGUID, text, secs)
	}
	return s.script(ctx, t.String(), sendTextToParticipantScript, t.Address, text, t.Service, secs)
}

// SendFile sends the file at path, which must be absolute (and, on macOS
// 15 and later, somewhere sandboxed Messages may read: under
// ~/Library/Messages), to t.
func (s *Sender) SendFile(ctx context.Context, t Target, path string) error {
	if err := checkTarget(t); err != nil {
		return err
	}
	if err := checkPath(path); err != nil {
		return err
	}
	secs := s.scriptSeconds()
	if t.ChatGUID != "" {
		return s.script(ctx, t.String(), sendFileToChatScript, t.ChatGUID, path, secs)
	}
	return s.script(ctx, t.String(), sendFileToParticipantScript, t.Address, path, t.Service, secs)
}

// EnsureRunning starts Messages in the background if it is not running.
func (s *Sender) EnsureRunning(ctx context.Context) error {
	return s.script(ctx, "the Messages app", ensureMessagesScript)
}

// pingTimeout bounds a ping: Messages counts its chats at once unless it is
// hung, or an Automation prompt nobody answers holds the script.
const pingTimeout = 10 * time.Second

// Ping asks Messages how many chats it has: nil when it answers, an error
// wrapping ErrTimedOut when it does not within pingTimeout (or the send
// timeout, if shorter), ErrNotRunning when it is not running.
func (s *Sender) Ping(ctx context.Context) error {
	timeout := min(pingTimeout, s.timeout)
	secs := strconv.Itoa(max(1, int((timeout-scriptTimeoutMargin)/time.Second)))
	return s.scriptWithin(ctx, timeout, "the Messages app", pingMessagesScript, secs)
}

// Quit quits Messages, killing it if it does not quit in time.
func (s *Sender) Quit(ctx context.Context) error {
	return s.script(ctx, "the Messages app", quitMessagesScript, s.scriptSeconds())
}

func checkTarget(t Target) error {
	if t.ChatGUID != "" {
		return checkChatGUID(t.ChatGUID)
	}
	if t.Address == "" || strings.ContainsRune(t.Address, 0) {
		return bridge.Permanent(fmt.Errorf("%w: invalid address %q", errRefused, t.Address))
	}
	if t.Service != "iMessage" && t.Service != "SMS" && t.Service != "RCS" {
		return bridge.Permanent(fmt.Errorf("%w: unknown account service %q (want iMessage, SMS or RCS)", errRefused, t.Service))
	}
	return nil
}

func checkPath(path string) error {
	if !strings.HasPrefix(path, "/") {
		return bridge.Permanent(fmt.Errorf("%w: file path %q is not absolute", errRefused, path))
	}
	if strings.ContainsRune(path, 0) {
		return bridge.Permanent(fmt.Errorf("%w: file path contains a NUL character", errRefused))
	}
	return nil
}

// script runs one script in the sender's turn. target names what was
// addressed, for errors.
func (s *Sender) script(ctx context.Context, target, script string, args ...string) error {
	return s.scriptWithin(ctx, s.timeout, target, script, args...)
}

// scriptWithin is script with a timeout of its own.
func (s *Sender) scriptWithin(ctx context.Context, timeout time.Duration, target, script string, args ...string) error {
	if err := s.wait(ctx); err != nil {
		return err
	}
	defer s.done()
	err := s.classify(ctx, s.run(ctx, timeout, script, args), target, timeout)
	if ctx.Err() == nil {
		s.health.script(err, time.Now())
	}
	return err
}

// wait takes the sender's turn, or gives up when ctx ends.
func (s *Sender) wait(ctx context.Context) error {
	s.queued.Add(1)
	defer s.queued.Add(-1)
	select {
	case s.turn <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("messages: waiting for an earlier send: %w", ctx.Err())
	}
}

func (s *Sender) done() { <-s.turn }

// run runs one script, killed after timeout.
func (s *Sender) run(ctx context.Context, timeout time.Duration, script string, args []string) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := s.runner.Run(ctx, script, args)
	return err
}

// classify turns a run's error into what the bridge acts on. target names
// what was addressed.
func (s *Sender) classify(ctx context.Context, err error, target string, timeout time.Duration) error {
	if err == nil {
		return nil
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		// The caller gave up: not Messages' fault, and not final.
		return fmt.Errorf("messages: send abandoned: %w: %w", ctxErr, err)
	}
	var se *ScriptError
	isScript := errors.As(err, &se)
	switch {
	case isScript && (se.Code == scriptErrNotPermitted || se.Code == scriptErrNeedsUserOK):
		return bridge.Permanent(fmt.Errorf("%w: %w", ErrAutomationDenied, err))
	case isScript && se.Code == scriptErrNotFound:
		return fmt.Errorf("%w (%s): %w", ErrChatNotFound, target, err)
	case isScript && se.Code == scriptErrNotRunning:
		return fmt.Errorf("%w: %w", ErrNotRunning, err)
	case isScript && (se.Code == scriptErrParam || se.Code == scriptErrParamMissing || se.Code == scriptErrSyntax || se.Code == scriptErrSyntaxUnknown):
		return bridge.Permanent(fmt.Errorf("%w (%s): %w", errRefused, target, err))
	case isScript && (se.Code == scriptErrTimedOut || se.Code == scriptErrConnInvalid || strings.Contains(se.Stderr, "timed out")):
		return fmt.Errorf("%w: %w", ErrTimedOut, err)
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("%w within %s (is it hung, or an Automation prompt waiting?): %w", ErrTimedOut, timeout, err)
	case errors.Is(err, syscall.E2BIG):
		return bridge.Permanent(fmt.Errorf("%w: %w", errTooLong, err))
	}
	return fmt.Errorf("messages: script failed (%s): %w", target, err)
}
