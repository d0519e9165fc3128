// Package doctor is what `blueline doctor` and the MCP diagnose tool
// share: a check's result and its stable names, and the checks made of
// what the running daemon answers about a line (GET /v1/lines), which an
// agent can run from anywhere; the checks of the Mac itself (chat.db,
// Automation, Messages' accounts) stay with the command, on the host.
package doctor

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/blueline-app/blueline/bridge/messages"
	"github.com/blueline-app/blueline/client/api"
)

// The results of a check. A skipped check (not on macOS, or after one it
// needs failed) and a warning do not fail doctor.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "fail"
	Skip = "skip"
)

// The checks, by their stable names (doctor --json's "name").
const (
	MacOSVersion   = "macos_version"
	FullDiskAccess = "full_disk_access"
	ChatDB         = "chat_db"
	Automation     = "automation"
	MessagesPing   = "messages_ping"
	Account        = "account"
	Helper         = "helper"
	Daemon         = "daemon"
)

// HostChecks are the checks only the host can make, of itself: they test
// the permissions and files of the program that runs them.
var HostChecks = []string{MacOSVersion, FullDiskAccess, ChatDB, Automation, MessagesPing, Account}

// Check is one check's result.
type Check struct {
	Name   string `json:"name"`
	Line   string `json:"line"` // the line's handle; "" for the host
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
	// Info is what the check found, for scripts (chat.db's identity, the
	// accounts, the helper's capabilities, …).
	Info map[string]any `json:"info,omitempty"`
}

// executable is the program macOS grants permissions to.
func executable() string {
	exe, err := os.Executable()
	if err != nil {
		return "the blueline binary"
	}
	return exe
}

// FullDiskAccessFix is the fix of a chat.db macOS does not let us read.
func FullDiskAccessFix() string {
	return "System Settings → Privacy & Security → Full Disk Access: add " + executable() +
		" (+, then ⌘⇧G and its path) and switch it on; when doctor runs from a terminal, the terminal app needs it too. " +
		"Grant it again after each upgrade, then `blueline restart`"
}

// AutomationFix is the fix of an AppleScript macOS does not let reach
// Messages.
func AutomationFix() string {
	return "System Settings → Privacy & Security → Automation: switch Messages on under " + executable() +
		" (for the service) and under the terminal app (for doctor). If it is not listed, or was refused before, " +
		"run `tccutil reset AppleEvents`, then send once from the same program to get the prompt again"
}

// HelperCheck is the private-API helper of a line the daemon serves, as
// the daemon sees it; port, when not 0, is where the helper would connect.
func HelperCheck(l *api.Line, port int) Check {
	c := Check{Name: Helper, Line: l.Handle}
	var can, cannot []string
	for _, f := range slices.Sorted(maps.Keys(l.Capabilities)) {
		if l.Capabilities[f].Available {
			can = append(can, f)
		} else if r := l.Capabilities[f].Reason; r != nil {
			cannot = append(cannot, f+" ("+*r+")")
		}
	}
	c.Info = map[string]any{"connected": l.AdvancedFeatures, "capabilities": l.Capabilities}
	if port != 0 {
		c.Info["port"] = port
	}
	if !l.AdvancedFeatures {
		c.Status, c.Detail = Warn, "not connected (optional): reactions, typing, read receipts and the other advanced features are off"
		if port != 0 {
			c.Detail += fmt.Sprintf("; it would connect to 127.0.0.1:%d", port)
		}
		c.Fix = "load BlueBubbles' helper bundle into Messages (it needs System Integrity Protection and library validation off: see BlueBubbles' install guide)"
		return c
	}
	c.Status, c.Detail = OK, "connected; the line can: "+strings.Join(can, ", ")
	if len(cannot) > 0 {
		c.Detail += "; cannot: " + strings.Join(cannot, ", ")
	}
	return c
}

// DaemonCheck is the running daemon's view of a line it serves: its
// health summary.
func DaemonCheck(l *api.Line) Check {
	c := Check{Name: Daemon, Line: l.Handle}
	if l.Health == nil {
		c.Status, c.Detail = Warn, "running; the line reports no health"
		return c
	}
	c.Info = map[string]any{"summary": l.Health.Summary, "active": l.IsActive}
	problems := messages.HealthProblems(l.Health.Summary)
	if len(problems) == 0 {
		c.Status, c.Detail = OK, "running: "+l.Health.Summary
		return c
	}
	c.Status, c.Detail = Fail, "running, but "+strings.Join(problems, ", ")+" ("+l.Health.Summary+")"
	var fixes []string
	for _, p := range problems {
		switch {
		case strings.HasPrefix(p, "chat.db"):
			fixes = append(fixes, FullDiskAccessFix())
		case strings.HasPrefix(p, "Automation denied"):
			fixes = append(fixes, AutomationFix())
		case strings.HasPrefix(p, "Automation"):
			fixes = append(fixes, "answer the Automation prompt on the Mac's screen (Screen Sharing will do)")
		default:
			fixes = append(fixes, "quit Messages (Force Quit if need be): the daemon launches it again")
		}
	}
	c.Fix = strings.Join(fixes, "; ")
	return c
}
