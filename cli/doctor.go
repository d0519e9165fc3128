package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/bridge/messages"
	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/doctor"
	"github.com/blueline-app/blueline/handle"
)

// How long doctor waits for Messages: an AppleScript that reaches it
// (Automation, the accounts), and the bridge's ping.
const (
	doctorScriptTimeout = 10 * time.Second
	doctorPingTimeout   = 5 * time.Second
)

// notOnMac is the detail of a check that needs macOS, elsewhere.
const notOnMac = "not on macOS"

// doctorReport is what doctor --json prints.
type doctorReport struct {
	OK     bool           `json:"ok"`
	Config string         `json:"config"` // "" for the embedded default
	Checks []doctor.Check `json:"checks"`
}

type doctorFlags struct {
	json    bool
	line    string
	trace   string
	minutes float64
}

func (a *app) doctorCommand() *cobra.Command {
	var f doctorFlags
	c := &cobra.Command{
		Use:   "doctor [--json] [--trace FILE [--minutes N]] [--line HANDLE]",
		Short: "Check, on the Mac, what each Messages line needs; or trace what Messages writes",
		Long: `Check, on the host, each thing a bridge = "messages" line depends on, and print
one line per check with its result and, when it fails, the fix:

  macos_version     the Mac's macOS version
  full_disk_access  chat.db can be opened and read
  chat_db           chat.db's path, inode, size, last ROWID, newest row's date
  automation        an AppleScript that reaches Messages is allowed (-1743: not)
  messages_ping     Messages answers the bridge's ping
  account           Messages' accounts, and the addresses chat.db's rows use
  helper            the private-API helper: connected, and what it declares
  daemon            the running daemon's view of the line: its health

macOS grants Full Disk Access and Automation per program: run from a terminal,
the checks test the terminal app's; the daemon check shows the service's own.
On another OS the Mac-only checks say "not on macOS" and do not fail (a line
whose chat_db and osascript are stand-ins, as in tests, is checked with them).
Exits 0 when every check holds (a skipped one or a warning does not fail).

--trace FILE records, for --minutes (10), the shape of every row Messages
writes, changes or deletes in chat.db into FILE, one JSON object a line:
every column, with each text, address, name, file name and GUID replaced by a
keyed hash (a key made for the trace and never written: equal values hash
alike within the trace) and each blob by its structure. Read FILE before you
share it: nothing leaves the Mac unless you send it.`,
		Example: `  blueline doctor
  blueline doctor --json | jq '.checks[] | select(.status == "fail")'
  blueline doctor --trace ~/Desktop/blueline-trace.jsonl --minutes 15`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.Flags().Changed("minutes") && f.trace == "" {
				return usageErrorf("--minutes goes with --trace FILE")
			}
			if f.trace != "" && (f.minutes <= 0 || f.minutes > 24*60) {
				return usageErrorf("--minutes must be more than 0 and at most 1440, got %v", f.minutes)
			}
			return a.doctor(cmd.Context(), f)
		},
	}
	fl := c.Flags()
	fl.BoolVar(&f.json, "json", false, "print the results as JSON")
	fl.StringVar(&f.line, "line", "", "check (or trace) only this line")
	fl.StringVar(&f.trace, "trace", "", "record the shape of what Messages writes to chat.db into FILE (JSON lines)")
	fl.Float64Var(&f.minutes, "minutes", 10, "how long --trace records")
	return c
}

func (a *app) doctor(ctx context.Context, f doctorFlags) error {
	path, _ := a.configPath()
	cfg, err := a.config()
	if err != nil {
		return err
	}
	var lines []config.Line
	for _, l := range cfg.Lines {
		if l.Bridge == "messages" && (f.line == "" || sameHandle(l.Handle, f.line)) {
			lines = append(lines, l)
		}
	}
	switch {
	case len(lines) == 0 && f.line != "":
		return usageErrorf("no line %s with bridge = \"messages\" in the configuration", f.line)
	case len(lines) == 0:
		where := path
		if where == "" {
			where = sourceDefault
		}
		return fmt.Errorf("no line has bridge = \"messages\" in the configuration (%s): doctor checks the Messages bridge", where)
	case f.trace != "" && len(lines) > 1:
		return usageErrorf("several Messages lines: pick the one to trace with --line HANDLE")
	case f.trace != "":
		return a.trace(ctx, lines[0], f.trace, time.Duration(f.minutes*float64(time.Minute)))
	}

	r := doctorReport{Config: path, Checks: []doctor.Check{macOSCheck()}}
	var served []api.Line
	dctx, cancel := context.WithTimeout(ctx, pingTimeout)
	_, daemonErr := a.adminList(dctx, "/v1/lines", &served)
	cancel()
	for _, l := range lines {
		r.Checks = append(r.Checks, a.lineChecks(ctx, cfg, l, served, daemonErr)...)
	}
	failed := 0
	for _, c := range r.Checks {
		if c.Status == doctor.Fail {
			failed++
		}
	}
	r.OK = failed == 0
	if f.json {
		if err := printJSON(a.stdout, r); err != nil {
			return err
		}
	} else {
		a.printDoctor(r, failed)
	}
	if failed > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed", failed, len(r.Checks))
	}
	return nil
}

func sameHandle(a, b string) bool {
	na, err1 := handle.Normalize(a)
	nb, err2 := handle.Normalize(b)
	return err1 == nil && err2 == nil && na == nb
}

// printDoctor prints the report for people: the checks under their line,
// each with its fix when it failed.
func (a *app) printDoctor(r doctorReport, failed int) {
	if runtime.GOOS == "darwin" {
		fmt.Fprintln(a.stdout, "macOS grants Full Disk Access and Automation per program: from a terminal these checks test the terminal app's; the daemon check shows the service's.")
	}
	line := "-"
	for _, c := range r.Checks {
		if c.Line != line {
			line = c.Line
			if line == "" {
				fmt.Fprintln(a.stdout, "host")
			} else {
				fmt.Fprintf(a.stdout, "line %s\n", line)
			}
		}
		status := c.Status
		if status == doctor.Fail {
			status = "FAIL"
		}
		fmt.Fprintf(a.stdout, "  %-5s %-17s %s\n", status, c.Name, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(a.stdout, "        fix: %s\n", c.Fix)
		}
	}
	if failed == 0 {
		fmt.Fprintln(a.stdout, "every check holds")
	}
}

// macOSCheck reports the Mac's macOS version.
func macOSCheck() doctor.Check {
	c := doctor.Check{Name: doctor.MacOSVersion, Status: doctor.Skip, Detail: notOnMac}
	if runtime.GOOS != "darwin" {
		return c
	}
	v := messages.HostMacOSVersion()
	if v == "" {
		c.Status, c.Detail = doctor.Warn, "macOS does not say which version it is (sysctl kern.osproductversion)"
		return c
	}
	c.Status, c.Detail, c.Info = doctor.OK, "macOS "+v, map[string]any{"version": v}
	return c
}

// lineChecks runs the checks of one Messages line. served is the daemon's
// list of lines (daemonErr why there is none).
func (a *app) lineChecks(ctx context.Context, cfg *config.Config, l config.Line, served []api.Line, daemonErr error) []doctor.Check {
	onMac := runtime.GOOS == "darwin"
	var out []doctor.Check
	add := func(c doctor.Check) {
		c.Line = l.Handle
		out = append(out, c)
	}
	skip := func(name, why string) { add(doctor.Check{Name: name, Status: doctor.Skip, Detail: why}) }

	var callerIDs []string
	if !onMac && l.ChatDB == config.DefaultChatDB {
		skip(doctor.FullDiskAccess, notOnMac)
		skip(doctor.ChatDB, notOnMac)
	} else {
		access, ident, ids := chatDBChecks(ctx, l.ChatDB)
		add(access)
		add(ident)
		callerIDs = ids
	}

	if !onMac && l.Osascript == config.DefaultOsascript {
		skip(doctor.Automation, notOnMac)
		skip(doctor.MessagesPing, notOnMac)
		skip(doctor.Account, notOnMac)
	} else {
		// The line's own osascript, exactly as configured: a stand-in in
		// tests.
		runner := messages.Osascript{Path: l.Osascript}
		auto := automationCheck(ctx, runner)
		add(auto)
		if auto.Status == doctor.Fail {
			skip(doctor.MessagesPing, "needs Automation (above)")
			skip(doctor.Account, "needs Automation (above)")
		} else {
			add(pingCheck(ctx, runner))
			add(accountCheck(ctx, runner, l, callerIDs))
		}
	}

	i := slices.IndexFunc(served, func(s api.Line) bool { return sameHandle(s.Handle, l.Handle) })
	var mine *api.Line
	if i >= 0 {
		mine = &served[i]
	}
	port := l.HelperPort
	if port == 0 {
		port = messages.DefaultHelperPort()
	}
	add(helperCheck(mine, daemonErr, port))
	add(daemonCheck(mine, daemonErr, adminsock.Path(cfg.DataDir())))
	return out
}

// chatDBChecks opens chat.db as the bridge does: can it be read (Full Disk
// Access), and what file is it. It also returns the owner's addresses the
// newest rows name, for the account check.
func chatDBChecks(ctx context.Context, configured string) (access, ident doctor.Check, callerIDs []string) {
	access = doctor.Check{Name: doctor.FullDiskAccess}
	ident = doctor.Check{Name: doctor.ChatDB, Status: doctor.Skip, Detail: "chat.db cannot be read (above)"}
	path, err := messages.ExpandHome(configured)
	if err != nil {
		access.Status, access.Detail = doctor.Fail, err.Error()
		return access, ident, nil
	}
	db, err := chatdb.Open(ctx, path)
	if err == nil {
		defer db.Close()
		_, err = db.LastRowID(ctx) // the cheap query: Open read the schema only
	}
	switch {
	case errors.Is(err, fs.ErrNotExist):
		access.Status, access.Detail = doctor.Fail, err.Error()
		access.Fix = "open Messages on this Mac as the user the service runs as, and sign in; or set the line's chat_db"
		return access, ident, nil
	case err != nil && strings.Contains(err.Error(), "Full Disk Access"):
		access.Status, access.Detail, access.Fix = doctor.Fail, err.Error(), doctor.FullDiskAccessFix()
		return access, ident, nil
	case err != nil:
		access.Status, access.Detail = doctor.Fail, err.Error()
		return access, ident, nil
	}
	access.Status, access.Detail = doctor.OK, path+" can be read"

	info := map[string]any{"path": path}
	var facts []string
	if fi, err := os.Stat(path); err == nil {
		info["size_bytes"] = fi.Size()
		facts = append(facts, byteSize(fi.Size()))
		if st, ok := fi.Sys().(*syscall.Stat_t); ok {
			info["inode"] = st.Ino
			facts = append([]string{fmt.Sprintf("inode %d", st.Ino)}, facts...)
		}
	}
	if fi, err := os.Stat(path + "-wal"); err == nil {
		info["wal_bytes"] = fi.Size()
		facts = append(facts, "write-ahead log "+byteSize(fi.Size()))
	}
	last, err1 := db.LastRowID(ctx)
	newest, date, err2 := db.NewestRow(ctx)
	ids, err3 := db.CallerIDs(ctx, 1000)
	if err := errors.Join(err1, err2, err3); err != nil {
		ident.Status, ident.Detail = doctor.Fail, err.Error()
		return access, ident, nil
	}
	info["last_rowid"], info["newest_rowid"] = last, newest
	facts = append(facts, fmt.Sprintf("last ROWID %d", last))
	if !date.IsZero() {
		info["newest_date"] = date.UTC().Format(time.RFC3339)
		facts = append(facts, "newest row "+date.UTC().Format(time.RFC3339))
	} else {
		facts = append(facts, "no rows")
	}
	ident.Status, ident.Detail, ident.Info = doctor.OK, path+": "+strings.Join(facts, ", "), info
	return access, ident, ids
}

// byteSize is n bytes for people: "812 kB", "1.3 GB".
func byteSize(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d bytes", n)
	}
	v, prefix := float64(n)/unit, "kMGTP"
	for v >= unit && len(prefix) > 1 {
		v, prefix = v/unit, prefix[1:]
	}
	return fmt.Sprintf("%.1f %cB", v, prefix[0])
}

// automationCheck runs a harmless AppleScript that reaches Messages.
func automationCheck(ctx context.Context, r messages.Runner) doctor.Check {
	c := doctor.Check{Name: doctor.Automation}
	err := messages.CheckAutomation(ctx, r, doctorScriptTimeout)
	switch {
	case err == nil:
		c.Status, c.Detail = doctor.OK, "macOS lets this program control Messages"
	case errors.Is(err, messages.ErrAutomationDenied):
		c.Status, c.Detail, c.Fix = doctor.Fail, "macOS does not let this program control Messages", doctor.AutomationFix()
		if se, ok := errors.AsType[*messages.ScriptError](err); ok {
			c.Detail += fmt.Sprintf(" (%d): %s", se.Code, strings.TrimSpace(se.Stderr))
		}
	case errors.Is(err, messages.ErrTimedOut):
		c.Status, c.Detail = doctor.Fail, err.Error()
		c.Fix = "answer the prompt that asks to let the program control Messages, on the Mac's screen (Screen Sharing will do)"
	default:
		c.Status, c.Detail = doctor.Fail, err.Error()
	}
	return c
}

// pingCheck is the bridge's own ping of Messages.
func pingCheck(ctx context.Context, r messages.Runner) doctor.Check {
	c := doctor.Check{Name: doctor.MessagesPing}
	err := messages.NewSender(r, doctorPingTimeout).Ping(ctx)
	switch {
	case err == nil:
		c.Status, c.Detail = doctor.OK, "Messages answers"
	case errors.Is(err, messages.ErrNotRunning):
		c.Status, c.Detail = doctor.Fail, "Messages is not running"
		c.Fix = "open Messages in the logged-in session (the daemon launches it when it is not running)"
	case errors.Is(err, messages.ErrTimedOut):
		c.Status, c.Detail = doctor.Fail, err.Error()
		c.Fix = "Messages is hung: quit it (Force Quit if need be) and open it again"
	case errors.Is(err, messages.ErrAutomationDenied):
		c.Status, c.Detail, c.Fix = doctor.Fail, err.Error(), doctor.AutomationFix()
	default:
		c.Status, c.Detail = doctor.Fail, err.Error()
	}
	return c
}

// accountCheck lists Messages' accounts: the line's service needs an
// enabled one, and the line's handle should be one of the accounts or of
// the addresses chat.db's rows use (its aliases).
func accountCheck(ctx context.Context, r messages.Runner, l config.Line, callerIDs []string) doctor.Check {
	c := doctor.Check{Name: doctor.Account}
	accts, err := messages.Accounts(ctx, r, doctorScriptTimeout)
	if err != nil {
		c.Status, c.Detail = doctor.Fail, err.Error()
		if errors.Is(err, messages.ErrAutomationDenied) {
			c.Fix = doctor.AutomationFix()
		}
		return c
	}
	service := "iMessage"
	if l.Service == "sms" {
		service = "SMS"
	}
	c.Info = map[string]any{"accounts": accts, "aliases": callerIDs}
	var parts []string
	enabled, known := false, false
	for _, ac := range accts {
		state := "disabled"
		if ac.Enabled {
			state = "enabled"
		}
		if ac.Connection != "" {
			state += ", " + ac.Connection
		}
		parts = append(parts, fmt.Sprintf("%s %s (%s)", ac.Service, ac.Description, state))
		if strings.EqualFold(ac.Service, service) && ac.Enabled {
			enabled = true
		}
		if sameHandle(stripAccountPrefix(ac.Description), l.Handle) {
			known = true
		}
	}
	for _, id := range callerIDs {
		if sameHandle(stripAccountPrefix(id), l.Handle) {
			known = true
		}
	}
	detail := "accounts: none"
	if len(parts) > 0 {
		detail = "accounts: " + strings.Join(parts, "; ")
	}
	if len(callerIDs) > 0 {
		detail += "; addresses in chat.db's latest rows: " + strings.Join(callerIDs, ", ")
	}
	switch {
	case !enabled:
		c.Status, c.Detail = doctor.Fail, fmt.Sprintf("no enabled %s account; %s", service, detail)
		c.Fix = "sign Messages in to the line's Apple ID (Messages → Settings → iMessage); for SMS, turn on Text Message Forwarding to this Mac on the iPhone"
	case !known:
		c.Status, c.Detail = doctor.Warn, fmt.Sprintf("%s is neither an account nor an address of chat.db's latest rows; %s", l.Handle, detail)
		c.Fix = "check that Messages is signed in to the Apple ID (or number) of the line"
	default:
		c.Status, c.Detail = doctor.OK, detail
	}
	return c
}

// stripAccountPrefix drops Messages' "E:" (e-mail) or "P:" (phone) from
// an account or caller ID.
func stripAccountPrefix(s string) string {
	if len(s) > 2 && (strings.HasPrefix(s, "E:") || strings.HasPrefix(s, "P:")) {
		return s[2:]
	}
	return s
}

// helperCheck is the private-API helper, as the daemon sees it.
func helperCheck(l *api.Line, daemonErr error, port int) doctor.Check {
	switch {
	case daemonErr != nil:
		return doctor.Check{Name: doctor.Helper, Status: doctor.Skip, Detail: "the daemon does not answer (see daemon)"}
	case l == nil:
		return doctor.Check{Name: doctor.Helper, Status: doctor.Skip, Detail: "the daemon does not serve this line (see daemon)"}
	}
	return doctor.HelperCheck(l, port)
}

// daemonCheck is the running daemon's view of the line.
func daemonCheck(l *api.Line, daemonErr error, socket string) doctor.Check {
	c := doctor.Check{Name: doctor.Daemon}
	switch {
	case errors.Is(daemonErr, adminsock.ErrDaemonNotRunning):
		c.Status, c.Detail = doctor.Fail, "the daemon is not running (no answer on "+socket+")"
		c.Fix = "start it: `blueline start` (the installed service) or `blueline serve`; its log says why it stopped"
		return c
	case daemonErr != nil:
		c.Status, c.Detail = doctor.Fail, fmt.Sprintf("the daemon does not answer on %s: %v", socket, daemonErr)
		c.Fix = "start it: `blueline start` (the installed service) or `blueline serve`; its log says why it stopped"
		return c
	case l == nil:
		c.Status, c.Detail = doctor.Fail, "the running daemon does not serve this line"
		c.Fix = "`blueline restart`, so that the daemon reads the configuration again"
		return c
	}
	return doctor.DaemonCheck(l)
}

// trace records what Messages writes to the line's chat.db into path for
// d, or until ctx ends (Ctrl-C).
func (a *app) trace(ctx context.Context, l config.Line, path string, d time.Duration) error {
	if runtime.GOOS != "darwin" && l.ChatDB == config.DefaultChatDB {
		return fmt.Errorf("doctor --trace reads the Messages database of a Mac: %s", notOnMac)
	}
	dbPath, err := messages.ExpandHome(l.ChatDB)
	if err != nil {
		return err
	}
	db, err := chatdb.Open(ctx, dbPath)
	if err != nil {
		if strings.Contains(err.Error(), "Full Disk Access") {
			return fmt.Errorf("%w\nfix: %s", err, doctor.FullDiskAccessFix())
		}
		return err
	}
	defer db.Close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("doctor --trace: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	fmt.Fprintf(a.stderr, "doctor: recording the shape of what Messages writes to %s into %s for %s (Ctrl-C ends it sooner)\n", dbPath, path, d)
	counts, err := db.Trace(ctx, f, chatdb.TraceOptions{MacOS: messages.HostMacOSVersion()})
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("doctor --trace: %w", cerr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "wrote %s: %d new rows, %d changed, %d deleted\n", path, counts.Inserts, counts.Updates, counts.Deletes)
	fmt.Fprintln(a.stdout, "it holds no text, address, name or file name (they are keyed hashes, the key not kept) and no blob's content; read it before you share it: nothing leaves this Mac unless you send it")
	return nil
}
