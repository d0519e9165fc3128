package messages

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// What `blueline doctor` asks of Messages, besides the bridge's own ping.
// Like the bridge's scripts, they take nothing from outside but their
// timeout, as an item of argv.
const (
	// automationScript sends Messages one Apple event that changes nothing
	// (it counts the accounts). An application's name or version would not
	// do: AppleScript answers those without asking the application, and so
	// without macOS checking the Automation permission. Like any `tell`,
	// it launches Messages when it is not running. argv: timeout in
	// seconds.
	automationScript = `on run argv
	set waitSeconds to (item 1 of argv) as integer
	tell application "Messages"
		with timeout of waitSeconds seconds
			count of accounts
		end timeout
	end tell
end run
`

	// accountsScript lists Messages' accounts, one a line: id, service
	// type, description (the Apple ID or number signed in), enabled and
	// connection status, separated by tabs. Each property is read on its
	// own, so that one a macOS version lacks leaves its field empty rather
	// than failing the list. argv: timeout in seconds.
	accountsScript = `on run argv
	set waitSeconds to (item 1 of argv) as integer
	if application "Messages" is not running then
		error "Messages is not running" number -600
	end if
	set out to ""
	tell application "Messages"
		with timeout of waitSeconds seconds
			repeat with acct in every account
				set fields to {"", "", "", "", ""}
				try
					set item 1 of fields to (id of acct) as text
				end try
				try
					set item 2 of fields to (service type of acct) as text
				end try
				try
					set item 3 of fields to (description of acct) as text
				end try
				try
					set item 4 of fields to (enabled of acct) as text
				end try
				try
					set item 5 of fields to (connection status of acct) as text
				end try
				set AppleScript's text item delimiters to tab
				set out to out & (fields as text) & linefeed
				set AppleScript's text item delimiters to ""
			end repeat
		end timeout
	end tell
	return out
end run
`
)

// HostMacOSVersion is this Mac's macOS version ("15.1"); "" away from a Mac
// or when macOS does not say.
func HostMacOSVersion() string { return hostMacOSVersion() }

// CheckAutomation sends Messages one harmless Apple event through r, killed
// after timeout: nil when macOS lets this process control Messages. An
// error wrapping ErrAutomationDenied means it does not (-1743, or -1744 when
// the prompt cannot be shown); ErrTimedOut, that nobody answered, as when a
// permission prompt waits on the screen.
func CheckAutomation(ctx context.Context, r Runner, timeout time.Duration) error {
	_, err := runDoctorScript(ctx, r, timeout, automationScript)
	return err
}

// Account is one of Messages' accounts, as its scripting shows it.
type Account struct {
	ID          string `json:"id"`
	Service     string `json:"service"`     // "iMessage", "SMS", "RCS"
	Description string `json:"description"` // the Apple ID or phone number it is signed in with
	Enabled     bool   `json:"enabled"`
	Connection  string `json:"connection"` // "connected", "disconnected", …; "" when macOS does not say
}

// Accounts lists Messages' accounts through r, killed after timeout.
// Messages must be running (else the error wraps ErrNotRunning).
func Accounts(ctx context.Context, r Runner, timeout time.Duration) ([]Account, error) {
	out, err := runDoctorScript(ctx, r, timeout, accountsScript)
	if err != nil {
		return nil, err
	}
	var accts []Account
	for line := range strings.Lines(out) {
		line = strings.TrimRight(line, "\r\n")
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.Split(line, "\t")
		for len(f) < 5 {
			f = append(f, "")
		}
		accts = append(accts, Account{ID: f[0], Service: f[1], Description: f[2], Enabled: f[3] == "true", Connection: f[4]})
	}
	return accts, nil
}

// runDoctorScript runs one of doctor's scripts and words its failure as the
// Sender's are worded (ErrAutomationDenied, ErrNotRunning, ErrTimedOut).
func runDoctorScript(ctx context.Context, r Runner, timeout time.Duration, script string) (string, error) {
	secs := strconv.Itoa(max(1, int((timeout-scriptTimeoutMargin)/time.Second)))
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := r.Run(rctx, script, []string{secs})
	if err == nil {
		return out, nil
	}
	if ctx.Err() != nil {
		return "", fmt.Errorf("messages: doctor's script abandoned: %w", ctx.Err())
	}
	var se *ScriptError
	isScript := errors.As(err, &se)
	switch {
	case isScript && (se.Code == scriptErrNotPermitted || se.Code == scriptErrNeedsUserOK):
		return "", fmt.Errorf("%w: %w", ErrAutomationDenied, err)
	case isScript && se.Code == scriptErrNotRunning:
		return "", fmt.Errorf("%w: %w", ErrNotRunning, err)
	case isScript && (se.Code == scriptErrTimedOut || strings.Contains(se.Stderr, "timed out")),
		errors.Is(err, context.DeadlineExceeded):
		return "", fmt.Errorf("%w within %s (an Automation prompt waiting on the screen?): %w", ErrTimedOut, timeout, err)
	}
	return "", err
}

// ExpandHome turns a leading "~" of a configured path into the home folder
// of the user this process runs as, as the bridge does.
func ExpandHome(p string) (string, error) { return expandHome(p) }

// unwell are the parts of a Health summary (Health.String) that say a line
// cannot work now.
var unwell = []string{"chat.db not readable", "Automation denied", "Automation permission pending", "Messages not answering"}

// HealthProblems returns the parts of a line's health summary (as
// Health.String words it for GET /v1/lines, /readyz and the console) that
// say the line cannot work now: chat.db not readable, Automation denied or
// waiting for its prompt, Messages not answering. None for a healthy line.
func HealthProblems(summary string) []string {
	var out []string
	for part := range strings.SplitSeq(summary, "; ") {
		for _, u := range unwell {
			if strings.HasPrefix(part, u) {
				out = append(out, part)
			}
		}
	}
	return out
}
