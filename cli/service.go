package cli

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"text/template"
	"time"

	"github.com/kardianos/service"
	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/config"
)

// The system service: blueline install|uninstall|start|stop|restart|status.
//
// The service manager runs `blueline serve --config FILE`, so the service and
// `serve` in a terminal are one code path (program, below). The service file
// (a systemd unit on Linux, a launchd LaunchAgent on macOS) is rendered here
// from our own templates and handed to kardianos/service whole, so what it
// writes is exactly what packaging/ ships and the golden tests check.

const (
	serviceName  = "blueline"            // the systemd unit blueline.service
	launchdLabel = "app.blueline.daemon" // the LaunchAgent's label and plist name
	serviceUser  = "blueline"            // the account the systemd unit runs as, by default
	// stopTimeout bounds program.Stop. serve's own shutdown gives up after
	// 10 s; the unit and the plist give the process 30 s before a SIGKILL.
	stopTimeout = 15 * time.Second
)

// program is the daemon as kardianos/service sees it: Start returns at once,
// serve running in a goroutine; Stop cancels it and waits, at most
// stopTimeout, for its bounded shutdown.
type program struct {
	cfgPath string
	over    config.Overrides
	build   Build
	stderr  io.Writer
	cancel  context.CancelFunc
	done    chan struct{} // closed when serve has returned
	err     error         // what serve returned
}

func newProgram(cfgPath string, over config.Overrides, build Build, stderr io.Writer) *program {
	return &program{cfgPath: cfgPath, over: over, build: build, stderr: stderr, done: make(chan struct{})}
}

// Start starts the daemon and returns without waiting for it.
func (p *program) Start(service.Service) error {
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	go func() {
		defer close(p.done)
		p.err = serve(ctx, p.cfgPath, p.over, p.build, p.stderr)
	}()
	return nil
}

// Stop asks the daemon to shut down and waits for it, within stopTimeout.
func (p *program) Stop(service.Service) error {
	p.cancel()
	select {
	case <-p.done:
		return p.err
	case <-time.After(stopTimeout):
		return fmt.Errorf("the daemon did not stop within %s", stopTimeout)
	}
}

// runProgram does what kardianos' Run does on Unix, with ctx as the stop
// signal (main cancels it on SIGTERM and SIGINT, which is how systemd and
// launchd stop a service). It also returns when the daemon ends on its own,
// as when it cannot start.
func runProgram(ctx context.Context, p *program) error {
	if err := p.Start(nil); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		return p.Stop(nil)
	case <-p.done:
		return p.err
	}
}

// unitSpec is what a service file is rendered from.
type unitSpec struct {
	Name    string // the systemd unit's name without ".service", or the launchd label
	Binary  string // absolute path of the blueline binary
	Config  string // absolute path of the configuration file
	DataDir string // absolute data folder: the working directory, on Linux the only one writable
	// systemd only: User is the account the daemon runs as. UserManager
	// renders a unit for a user manager instead (the lifecycle test): no
	// User=, no sandboxing and no capability, which need the system manager.
	User        string
	UserManager bool
	LogFile     string // launchd only: stdout and stderr
}

// systemdTemplate is the unit `blueline install` writes on Linux and the .deb
// ships (packaging/linux/blueline.service).
const systemdTemplate = `# Blueline, the messaging daemon, as a systemd service, written by
# ` + "`blueline install`" + `.
{{- if not .UserManager}} The .deb ships the same unit. Change it with
# ` + "`systemctl edit blueline`" + ` rather than here.
{{- end}}
[Unit]
Description=Blueline messaging daemon
Documentation=https://github.com/blueline-app/blueline
{{- if not .UserManager}}
After=network-online.target
Wants=network-online.target
{{- end}}

[Service]
Type=simple
ExecStart={{arg .Binary}} serve --config {{arg .Config}}
WorkingDirectory={{path .DataDir}}
{{- if not .UserManager}}
User={{.User}}
{{- end}}
Restart=on-failure
RestartSec=5s
# serve drains requests and stops its workers within 10 s of SIGTERM.
TimeoutStopSec=30s
{{- if not .UserManager}}

# Sandboxing: the system is read-only, home folders are hidden, /tmp is
# private, and the data folder is the one place the daemon may write.
NoNewPrivileges=yes
ProtectSystem=strict
ProtectHome=yes
PrivateTmp=yes
ReadWritePaths={{arg .DataDir}}
PrivateDevices=yes
ProtectKernelTunables=yes
ProtectKernelModules=yes
ProtectKernelLogs=yes
ProtectControlGroups=yes
ProtectClock=yes
ProtectHostname=yes
RestrictNamespaces=yes
RestrictRealtime=yes
RestrictSUIDSGID=yes
LockPersonality=yes
MemoryDenyWriteExecute=yes
RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6
SystemCallArchitectures=native
SystemCallFilter=@system-service
SystemCallErrorNumber=EPERM
UMask=0077
# The one privilege kept: binding ports below 1024, for [tls] http_listen
# (:80) and https_listen (:443).
AmbientCapabilities=CAP_NET_BIND_SERVICE
CapabilityBoundingSet=CAP_NET_BIND_SERVICE
{{- end}}

[Install]
WantedBy={{if .UserManager}}default.target{{else}}multi-user.target{{end}}
`

// launchdTemplate is the LaunchAgent `blueline install` writes on macOS. An
// agent, not a daemon: Messages needs the logged-in user's session.
const launchdTemplate = `<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<!-- Blueline, the messaging daemon, as a LaunchAgent. Written by ` + "`blueline install`" + `. -->
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>{{xml .Name}}</string>
	<key>ProgramArguments</key>
	<array>
		<string>{{xml .Binary}}</string>
		<string>serve</string>
		<string>--config</string>
		<string>{{xml .Config}}</string>
	</array>
	<key>WorkingDirectory</key>
	<string>{{xml .DataDir}}</string>
	<key>RunAtLoad</key>
	<true/>
	<key>KeepAlive</key>
	<true/>
	<key>LimitLoadToSessionType</key>
	<string>Aqua</string>
	<key>ExitTimeOut</key>
	<integer>30</integer>
	<key>StandardOutPath</key>
	<string>{{xml .LogFile}}</string>
	<key>StandardErrorPath</key>
	<string>{{xml .LogFile}}</string>
</dict>
</plist>
`

// unitTemplates holds both: "systemd" and "launchd".
var unitTemplates = func() *template.Template {
	t := template.Must(template.New("systemd").Funcs(template.FuncMap{
		"arg":  systemdArg,
		"path": systemdPath,
		"xml":  xmlText,
	}).Parse(systemdTemplate))
	template.Must(t.New("launchd").Parse(launchdTemplate))
	return t
}()

// systemdArg writes a path as one word of ExecStart= or ReadWritePaths=:
// quoted when it holds a space. checkUnitPath has refused what would need
// more escaping than that.
func systemdArg(s string) string {
	if strings.ContainsAny(s, " \t") {
		return `"` + s + `"`
	}
	return s
}

// systemdPath writes a path for WorkingDirectory=, which takes the rest of
// the line as it is.
func systemdPath(s string) string { return s }

func xmlText(s string) (string, error) {
	var b strings.Builder
	err := xml.EscapeText(&b, []byte(s))
	return b.String(), err
}

// checkUnitPath refuses a path a unit or plist cannot carry as written:
// relative, or with characters systemd would expand (%, $), unquote (", ',
// \) or that end a line, or "{{", which kardianos would take for a template
// action.
func checkUnitPath(what, p string) error {
	if !filepath.IsAbs(p) {
		return fmt.Errorf("%s %q is not an absolute path", what, p)
	}
	if strings.ContainsAny(p, "%$\"'\\\n\r") || strings.Contains(p, "{{") || strings.IndexFunc(p, func(r rune) bool { return r < 0x20 }) >= 0 {
		return fmt.Errorf(`%s %q: a service file cannot name a path with %%, $, quotes, backslashes, control characters or "{{"`, what, p)
	}
	return nil
}

func (u unitSpec) check() error {
	for _, p := range []struct{ what, path string }{{"the binary", u.Binary}, {"the configuration", u.Config}, {"the data folder", u.DataDir}} {
		if err := checkUnitPath(p.what, p.path); err != nil {
			return err
		}
	}
	if u.LogFile != "" {
		return checkUnitPath("the log file", u.LogFile)
	}
	return nil
}

// renderSystemdUnit is the systemd unit that runs u.
func renderSystemdUnit(u unitSpec) (string, error) {
	if err := u.check(); err != nil {
		return "", err
	}
	if !u.UserManager && (u.User == "" || strings.ContainsAny(u.User, " \t\n%$")) {
		return "", fmt.Errorf("the unit needs the name of the account it runs as, not %q", u.User)
	}
	return execTemplate("systemd", u)
}

// renderLaunchdPlist is the LaunchAgent that runs u.
func renderLaunchdPlist(u unitSpec) (string, error) {
	if err := u.check(); err != nil {
		return "", err
	}
	if u.LogFile == "" {
		return "", errors.New("the LaunchAgent needs a log file")
	}
	return execTemplate("launchd", u)
}

func execTemplate(name string, u unitSpec) (string, error) {
	var b strings.Builder
	if err := unitTemplates.ExecuteTemplate(&b, name, u); err != nil {
		return "", err
	}
	return b.String(), nil
}

// launchctlStartArgs are the commands that load the LaunchAgent when
// `launchctl load` fails, as it can on recent macOS: the domain subcommands,
// on the logged-in user's GUI domain (enable clears a `launchctl disable`).
func launchctlStartArgs(uid int, label, plist string) [][]string {
	domain := "gui/" + strconv.Itoa(uid)
	return [][]string{
		{"launchctl", "enable", domain + "/" + label},
		{"launchctl", "bootstrap", domain, plist},
	}
}

// launchctlStopArgs unload the LaunchAgent when `launchctl unload` fails.
func launchctlStopArgs(uid int, label string) [][]string {
	return [][]string{{"launchctl", "bootout", "gui/" + strconv.Itoa(uid) + "/" + label}}
}

// The states `status` reports.
const (
	stateRunning      = "running"
	stateStopped      = "stopped"
	stateFailed       = "failed"
	stateNotInstalled = "not installed"
)

// serviceSetup is the service on this machine, as kardianos/service manages it.
type serviceSetup struct {
	goos        string   // "linux" or "darwin"
	unit        unitSpec // Name always; the rest for install
	userService bool     // a LaunchAgent, or a systemd user manager's unit
	uid         int      // whose GUI domain launchctl's fallback addresses
	out         io.Writer
}

func (s *serviceSetup) service() (service.Service, error) {
	c := &service.Config{
		Name:        s.unit.Name,
		DisplayName: "Blueline",
		Description: "Blueline messaging daemon",
		Executable:  s.unit.Binary,
		Arguments:   []string{"serve", "--config", s.unit.Config},
		Option: service.KeyValue{
			"UserService": s.userService,
			"RunAtLoad":   true,
			"KeepAlive":   true,
			"Restart":     "on-failure",
		},
	}
	if s.unit.Binary != "" { // install: the file we render, whole
		c.WorkingDirectory = s.unit.DataDir
		switch s.goos {
		case "darwin":
			plist, err := renderLaunchdPlist(s.unit)
			if err != nil {
				return nil, err
			}
			c.Option["LaunchdConfig"] = plist
			c.Option["LogDirectory"] = filepath.Dir(s.unit.LogFile)
		default:
			unit, err := renderSystemdUnit(s.unit)
			if err != nil {
				return nil, err
			}
			c.Option["SystemdScript"] = unit
			c.UserName = s.unit.User
		}
	}
	// The service manager runs `blueline serve`, whose program this is;
	// here it only completes the Config (Run is never called on it).
	return service.New(newProgram(s.unit.Config, config.Overrides{}, Build{}, io.Discard), c)
}

// path is where the service file is (or would be) installed.
func (s *serviceSetup) path() (string, error) {
	switch {
	case s.goos == "darwin":
		home, err := homeDir()
		return filepath.Join(home, "Library", "LaunchAgents", s.unit.Name+".plist"), err
	case s.userService:
		home, err := os.UserHomeDir()
		return filepath.Join(home, ".config", "systemd", "user", s.unit.Name+".service"), err
	default:
		return "/etc/systemd/system/" + s.unit.Name + ".service", nil
	}
}

// homeDir is the home folder as kardianos finds it on macOS.
func homeDir() (string, error) {
	if u, err := user.Current(); err == nil && u.HomeDir != "" {
		return u.HomeDir, nil
	}
	return os.UserHomeDir()
}

// agentLogFile is where the LaunchAgent's output goes.
func agentLogFile() (string, error) {
	home, err := homeDir()
	return filepath.Join(home, "Library", "Logs", "Blueline", "blueline.log"), err
}

// where names the service for people: the plist's path on macOS, the unit's
// name under systemd (its file may be the .deb's, elsewhere than path).
func (s *serviceSetup) where(path string) string {
	if s.goos == "darwin" {
		return path
	}
	return s.unit.Name + ".service"
}

// logs says where the daemon's output goes.
func (s *serviceSetup) logs() string {
	switch {
	case s.goos == "darwin":
		if s.unit.LogFile != "" {
			return s.unit.LogFile
		}
		log, _ := agentLogFile()
		return log
	case s.userService:
		return "journalctl --user -u " + s.unit.Name
	default:
		return "journalctl -u " + s.unit.Name
	}
}

func (s *serviceSetup) state(svc service.Service) (string, error) {
	st, err := svc.Status()
	switch {
	case errors.Is(err, service.ErrNotInstalled):
		return stateNotInstalled, nil
	case err != nil && strings.Contains(err.Error(), "failed state"):
		return stateFailed, nil
	case err != nil:
		return "", fmt.Errorf("service status: %w", err)
	case st == service.StatusRunning:
		return stateRunning, nil
	case st == service.StatusStopped:
		return stateStopped, nil
	}
	return "", errors.New("service status: unknown")
}

// control runs one action. install needs s.unit complete.
func (s *serviceSetup) control(ctx context.Context, action string) error {
	svc, err := s.service()
	if err != nil {
		return err
	}
	state, err := s.state(svc)
	if err != nil {
		return err
	}
	path, err := s.path()
	if err != nil {
		return err
	}
	if state == stateNotInstalled && action != "install" {
		return fmt.Errorf("the service is not installed: `blueline install --config FILE` installs it")
	}
	switch action {
	case "install":
		if state != stateNotInstalled {
			return fmt.Errorf("the service is already installed (%s, %s): to install it again, `blueline uninstall` first", s.where(path), state)
		}
		if err := svc.Install(); err != nil {
			return fmt.Errorf("install %s: %w", path, err)
		}
		fmt.Fprintf(s.out, "installed %s\n  it runs: %s serve --config %s\n", path, s.unit.Binary, s.unit.Config)
		switch {
		case s.goos == "darwin":
			fmt.Fprintf(s.out, "  it starts when you log in; logs: %s\n", s.logs())
		case s.userService:
			fmt.Fprintf(s.out, "  it starts with your user manager; logs: %s\n", s.logs())
		default:
			fmt.Fprintf(s.out, "  as %s, writing only in %s\n  it starts at boot; logs: %s\n", s.unit.User, s.unit.DataDir, s.logs())
		}
		fmt.Fprintln(s.out, "start it now: blueline start")
	case "uninstall":
		if _, err := os.Stat(path); err != nil {
			return fmt.Errorf("the service was not installed by `blueline install` (%s: %w): remove it as it was installed (a .deb: apt remove blueline)", path, err)
		}
		if state == stateRunning {
			if err := s.stop(ctx, svc); err != nil {
				return err
			}
		} else if s.goos == "darwin" {
			// A crash-looping agent is loaded without running; an error
			// here means it was not loaded.
			s.stop(ctx, svc)
		}
		if err := svc.Uninstall(); err != nil {
			return fmt.Errorf("uninstall %s: %w", path, err)
		}
		fmt.Fprintf(s.out, "uninstalled %s (the configuration and the data folder are kept)\n", path)
	case "start":
		if state == stateRunning {
			fmt.Fprintln(s.out, "already running")
			return nil
		}
		if err := s.start(ctx, svc, path); err != nil {
			return err
		}
		fmt.Fprintf(s.out, "started; logs: %s\n", s.logs())
	case "stop":
		if state != stateRunning {
			fmt.Fprintf(s.out, "not running (%s)\n", state)
			return nil
		}
		if err := s.stop(ctx, svc); err != nil {
			return err
		}
		fmt.Fprintln(s.out, "stopped")
	case "restart":
		if s.goos == "darwin" {
			if state == stateRunning {
				if err := s.stop(ctx, svc); err != nil {
					return err
				}
			}
			err = s.start(ctx, svc, path)
		} else {
			err = svc.Restart()
		}
		if err != nil {
			return fmt.Errorf("restart: %w (logs: %s)", err, s.logs())
		}
		fmt.Fprintf(s.out, "restarted; logs: %s\n", s.logs())
	case "status":
		if state != stateRunning {
			return fmt.Errorf("%s (%s; logs: %s)", state, s.where(path), s.logs())
		}
		fmt.Fprintf(s.out, "running (%s; logs: %s)\n", s.where(path), s.logs())
	default:
		return fmt.Errorf("%w: unknown service command %q", errUsage, action)
	}
	return nil
}

// start starts the service; on macOS, when `launchctl load` fails, it
// bootstraps the agent into the user's GUI domain instead.
func (s *serviceSetup) start(ctx context.Context, svc service.Service, path string) error {
	err := svc.Start()
	if err != nil && s.goos == "darwin" {
		err = s.launchctl(ctx, err, launchctlStartArgs(s.uid, s.unit.Name, path))
	}
	if err != nil {
		return fmt.Errorf("start: %w (logs: %s)", err, s.logs())
	}
	return nil
}

// stop stops the service; on macOS, when `launchctl unload` fails, it boots
// the agent out of the user's GUI domain instead.
func (s *serviceSetup) stop(ctx context.Context, svc service.Service) error {
	err := svc.Stop()
	if err != nil && s.goos == "darwin" {
		err = s.launchctl(ctx, err, launchctlStopArgs(s.uid, s.unit.Name))
	}
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}

func (s *serviceSetup) launchctl(ctx context.Context, first error, cmds [][]string) error {
	for _, argv := range cmds {
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v; then %s: %v: %s", first, strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// serviceCommands are install, uninstall, start, stop and restart (status
// is its own, in status.go).
func (a *app) serviceCommands() []*cobra.Command {
	var runAs string
	install := &cobra.Command{
		Use:   "install --config FILE [--user NAME]",
		Short: "Install the system service running `serve --config FILE`",
		Long: `Install the system service running ` + "`blueline serve --config FILE`" + `: a LaunchAgent
of the logged-in user on macOS, a sandboxed systemd unit on Linux (as --user,
default blueline; run as root). The configuration is --config or
$BLUELINE_CONFIG: a service does not run on the embedded default. Once
installed, the other commands find this configuration without --config.`,
		Example: "  sudo blueline install --config /etc/blueline/blueline.toml\n  blueline install --config \"$HOME/Library/Application Support/Blueline/blueline.toml\"",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfgPath := a.configFlag
			if cfgPath == "" {
				cfgPath = a.env.getenv("BLUELINE_CONFIG")
			}
			// A service must not run on the embedded default: its data
			// folder is relative to a working directory nobody chose.
			if cfgPath == "" {
				return usageErrorf("install needs --config FILE (or $BLUELINE_CONFIG): a service does not run on the embedded default")
			}
			if runtime.GOOS == "darwin" && cmd.Flags().Changed("user") {
				return usageErrorf("--user is for Linux: the LaunchAgent runs as the user who installs it")
			}
			return a.serviceAction(cmd.Context(), "install", cfgPath, runAs)
		},
	}
	install.Flags().StringVar(&runAs, "user", serviceUser, "Linux: the account the service runs as")
	cmds := []*cobra.Command{install}
	for _, c := range []struct{ name, short, example string }{
		{"uninstall", "Remove the system service, keeping the configuration and the data", "  sudo blueline uninstall"},
		{"start", "Start the system service", "  sudo blueline start"},
		{"stop", "Stop the system service", "  sudo blueline stop"},
		{"restart", "Restart the system service", "  sudo blueline restart"},
	} {
		cmds = append(cmds, &cobra.Command{
			Use:     c.name,
			Short:   c.short,
			Long:    c.short + ": a systemd unit on Linux (run as root), a LaunchAgent of the logged-in user on macOS.",
			Example: c.example,
			Args:    noArgs,
			RunE: func(cmd *cobra.Command, args []string) error {
				if cmd.Flags().Changed("config") {
					return usageErrorf("%s takes no --config: only install does (the service runs with the configuration it was installed with)", c.name)
				}
				return a.serviceAction(cmd.Context(), c.name, "", "")
			},
		})
	}
	return cmds
}

// serviceSetupHere is the service on this machine, or why there is none.
func serviceSetupHere(action string, stdout io.Writer) (*serviceSetup, error) {
	s := &serviceSetup{goos: runtime.GOOS, unit: unitSpec{Name: serviceName}, uid: os.Getuid(), out: stdout}
	switch runtime.GOOS {
	case "darwin":
		s.userService, s.unit.Name = true, launchdLabel
		if os.Geteuid() == 0 {
			return nil, errors.New("the service is a LaunchAgent of the user logged in to Messages: run this as that user, without sudo")
		}
	case "linux":
		if p := service.Platform(); p != "linux-systemd" {
			return nil, fmt.Errorf("the service needs systemd, and systemd is not running here (%s): run `blueline serve --config FILE` under your own supervisor", orNone(p))
		}
		if os.Geteuid() != 0 && action != "status" {
			return nil, fmt.Errorf("%s changes a system service: run it as root (sudo blueline %s)", action, action)
		}
	default:
		return nil, fmt.Errorf("the service commands support Linux (systemd) and macOS (launchd), not %s", runtime.GOOS)
	}
	return s, nil
}

// serviceAction installs or controls the system service: a systemd unit on
// Linux, a LaunchAgent of the logged-in user on macOS.
func (a *app) serviceAction(ctx context.Context, action, cfgPath, runAs string) error {
	var spec unitSpec
	if action == "install" {
		var err error
		if spec, err = installSpec(cfgPath); err != nil {
			return err
		}
	}
	s, err := serviceSetupHere(action, a.stdout)
	if err != nil {
		return err
	}
	if action == "install" {
		name := s.unit.Name
		s.unit = spec
		s.unit.Name = name
		if err := s.prepare(runAs, a.stderr); err != nil {
			return err
		}
	}
	return s.control(ctx, action)
}

// installedServiceConfig is the configuration file the installed service
// runs with: read from its service file (the one `blueline install` wrote,
// or the .deb's unit), "" when there is none.
func installedServiceConfig() string {
	var paths []string
	switch runtime.GOOS {
	case "darwin":
		s := &serviceSetup{goos: "darwin", unit: unitSpec{Name: launchdLabel}, userService: true}
		if p, err := s.path(); err == nil {
			paths = append(paths, p)
		}
	case "linux":
		paths = []string{"/etc/systemd/system/" + serviceName + ".service", "/usr/lib/systemd/system/" + serviceName + ".service", "/lib/systemd/system/" + serviceName + ".service"}
	}
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil {
			if cfg := configInServiceFile(string(b)); cfg != "" {
				return cfg
			}
		}
	}
	return ""
}

var (
	systemdConfigArg = regexp.MustCompile(`(?m)^ExecStart=.*\sserve\s+--config\s+("([^"]*)"|(\S+))`)
	launchdConfigArg = regexp.MustCompile(`<string>--config</string>\s*<string>([^<]*)</string>`)
)

// configInServiceFile finds the configuration in a systemd unit's ExecStart
// or a LaunchAgent's ProgramArguments, as the templates write them.
func configInServiceFile(text string) string {
	if m := systemdConfigArg.FindStringSubmatch(text); m != nil {
		return m[2] + m[3]
	}
	if m := launchdConfigArg.FindStringSubmatch(text); m != nil {
		return html.UnescapeString(m[1])
	}
	return ""
}

func orNone(platform string) string {
	if platform == "" {
		return "no service manager found"
	}
	return "found " + platform
}

// installSpec checks the configuration a service is to run with and
// describes the service.
func installSpec(cfgPath string) (unitSpec, error) {
	abs, err := filepath.Abs(cfgPath)
	if err != nil {
		return unitSpec{}, err
	}
	cfg, err := config.Load(abs)
	if err != nil {
		return unitSpec{}, err
	}
	if !filepath.IsAbs(cfg.Storage.Dir) {
		return unitSpec{}, fmt.Errorf("config %s: storage.dir %q is relative: the service runs in another working directory, and the admin commands must find the same folder: write an absolute path", abs, cfg.Storage.Dir)
	}
	bin, err := os.Executable()
	if err != nil {
		return unitSpec{}, fmt.Errorf("find the blueline binary: %w", err)
	}
	if tmp := os.TempDir(); strings.HasPrefix(bin, tmp+string(filepath.Separator)) || strings.Contains(bin, "go-build") {
		return unitSpec{}, fmt.Errorf("%s is a temporary build (go run?): build or install blueline, then run install with that binary", bin)
	}
	return unitSpec{Name: serviceName, Binary: bin, Config: abs, DataDir: cfg.DataDir()}, nil
}

// prepare checks that this machine can run the service as specified, and
// creates the folders it needs: the data folder (on Linux, the one the
// sandbox leaves writable, which must exist) and on macOS the log folder.
func (s *serviceSetup) prepare(runAs string, stderr io.Writer) error {
	if s.goos == "darwin" {
		log, err := agentLogFile()
		if err != nil {
			return err
		}
		s.unit.LogFile = log
		if err := os.MkdirAll(filepath.Dir(s.unit.LogFile), 0o700); err != nil {
			return err
		}
		return os.MkdirAll(s.unit.DataDir, 0o700)
	}
	s.unit.User = runAs
	// ProtectHome and PrivateTmp hide these folders from the service.
	for _, p := range []struct{ what, path string }{{"the binary", s.unit.Binary}, {"the configuration", s.unit.Config}, {"the data folder", s.unit.DataDir}} {
		for _, hidden := range []string{"/home", "/root", "/run/user", "/tmp", "/var/tmp"} {
			if p.path == hidden || strings.HasPrefix(p.path, hidden+"/") {
				return fmt.Errorf("%s is %s, under %s, which the service's sandbox hides: move it (the binary to /usr/local/bin, the configuration to /etc/blueline, the data to /var/lib/blueline)", p.what, p.path, hidden)
			}
		}
	}
	account, err := user.Lookup(runAs)
	if err != nil {
		return fmt.Errorf("the service runs as %q, which does not exist: create it with `useradd --system --user-group --home-dir /var/lib/blueline --shell /usr/sbin/nologin %s`, or name another with --user", runAs, runAs)
	}
	uid, _ := strconv.Atoi(account.Uid)
	gid, _ := strconv.Atoi(account.Gid)
	fi, err := os.Stat(s.unit.DataDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.MkdirAll(s.unit.DataDir, 0o750); err != nil {
			return err
		}
		if err := os.Chown(s.unit.DataDir, uid, gid); err != nil {
			return err
		}
	case err != nil:
		return err
	default:
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
			fmt.Fprintf(stderr, "warning: %s does not belong to %s, who runs the service: chown -R %s: %s\n", s.unit.DataDir, runAs, runAs, s.unit.DataDir)
		}
	}
	if fi, err := os.Stat(s.unit.Config); err == nil {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && !readable(fi.Mode(), st, uid, gid) {
			fmt.Fprintf(stderr, "warning: %s cannot read %s: chgrp %s %s && chmod g+r %s\n", runAs, s.unit.Config, account.Gid, s.unit.Config, s.unit.Config)
		}
	}
	return nil
}

// readable reports whether a file with this mode and owner is readable by uid
// (in its primary group gid).
func readable(mode os.FileMode, st *syscall.Stat_t, uid, gid int) bool {
	switch {
	case int(st.Uid) == uid:
		return mode&0o400 != 0
	case int(st.Gid) == gid:
		return mode&0o040 != 0
	default:
		return mode&0o004 != 0
	}
}
