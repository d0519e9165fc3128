package cli

import (
	"bytes"
	"context"
	"encoding/xml"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/kardianos/service"

	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/storage"
	"github.com/blueline-app/blueline/testkit"
)

// root is the repository's root, from this package's folder: the files
// under packaging/ the tests compare with, and main.go to build.
const root = ".."

var update = flag.Bool("update", false, "rewrite the golden files under packaging/")

// debUnit is the unit the .deb ships: the binary, configuration and data
// folder where the package puts them.
var debUnit = unitSpec{
	Name: serviceName, Binary: "/usr/bin/blueline", Config: "/etc/blueline/blueline.toml",
	DataDir: "/var/lib/blueline", User: serviceUser,
}

// aliceAgent is the LaunchAgent of a user alice with a Homebrew binary.
var aliceAgent = unitSpec{
	Name: launchdLabel, Binary: "/opt/homebrew/bin/blueline",
	Config:  "/Users/alice/Library/Application Support/Blueline/blueline.toml",
	DataDir: "/Users/alice/Library/Application Support/Blueline/data",
	LogFile: "/Users/alice/Library/Logs/Blueline/blueline.log",
}

// golden compares got with the file at path, or rewrites it under -update.
func golden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./cli -run %s -update writes it)", err, t.Name())
	}
	if string(want) != got {
		t.Errorf("%s is not what the code renders; if the change is meant, go test ./cli -run '%s' -update:\n%s", path, t.Name(), firstDiff(string(want), got))
	}
}

// firstDiff shows the first line where two texts differ.
func firstDiff(file, rendered string) string {
	a, b := strings.Split(file, "\n"), strings.Split(rendered, "\n")
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if x != y || i >= len(a) || i >= len(b) {
			return fmt.Sprintf("line %d:\n  file:     %q\n  rendered: %q", i+1, x, y)
		}
	}
	return "(no difference)"
}

// The unit the .deb installs is the one `blueline install` writes: the
// committed file is checked against the template.
func TestSystemdUnitGolden(t *testing.T) {
	unit, err := renderSystemdUnit(debUnit)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join(root, "packaging/linux/blueline.service"), unit)
	for _, line := range []string{
		"ExecStart=/usr/bin/blueline serve --config /etc/blueline/blueline.toml", "User=blueline",
		"NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
		"ReadWritePaths=/var/lib/blueline", "AmbientCapabilities=CAP_NET_BIND_SERVICE",
		"CapabilityBoundingSet=CAP_NET_BIND_SERVICE", "Restart=on-failure", "WantedBy=multi-user.target",
	} {
		if !slices.Contains(strings.Split(unit, "\n"), line) {
			t.Errorf("the unit lacks %q", line)
		}
	}
	verifyUnit(t, unit)

	user := debUnit
	user.User, user.UserManager = "", true
	unit, err = renderSystemdUnit(user)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join(root, "packaging/testdata/blueline-user-manager.service"), unit)
}

// verifyUnit runs systemd-analyze verify on a unit, where it is installed.
func verifyUnit(t *testing.T, unit string) {
	t.Helper()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Log("no systemd-analyze: the unit's syntax is not verified")
		return
	}
	dir := t.TempDir()
	// verify checks that ExecStart's binary exists: point it at one that does.
	unit = strings.Replace(unit, "ExecStart=/usr/bin/blueline", "ExecStart=/bin/true", 1)
	path := filepath.Join(dir, "blueline.service")
	writeFile(t, path, unit)
	out, err := exec.Command(analyze, "verify", "--man=no", path).CombinedOutput()
	// Without systemd as PID 1 it cannot resolve the dependencies it names;
	// anything about our own file is still reported with its name.
	for _, line := range strings.Split(string(out), "\n") {
		if strings.Contains(line, "blueline.service") {
			t.Errorf("systemd-analyze verify: %s", line)
		}
	}
	if err != nil {
		t.Logf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestLaunchdPlistGolden(t *testing.T) {
	plist, err := renderLaunchdPlist(aliceAgent)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join(root, "packaging/testdata/app.blueline.daemon.plist"), plist)
	checkPlist(t, plist)
	for _, want := range []string{
		"<key>RunAtLoad</key>\n\t<true/>", "<key>KeepAlive</key>\n\t<true/>",
		"<string>/Users/alice/Library/Logs/Blueline/blueline.log</string>",
		"<string>serve</string>\n\t\t<string>--config</string>",
	} {
		if !strings.Contains(plist, want) {
			t.Errorf("the plist lacks %q", want)
		}
	}
}

// checkPlist fails unless plist is well-formed XML.
func checkPlist(t *testing.T, plist string) {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(plist))
	for {
		if _, err := dec.Token(); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("the plist is not well-formed: %v\n%s", err, plist)
		}
	}
}

// Paths are quoted or escaped as each format needs; paths a service file
// cannot carry are refused.
func TestServiceFilePaths(t *testing.T) {
	odd := unitSpec{
		Name: serviceName, Binary: "/opt/Blue Line/blueline", Config: "/etc/blue line/a&b<c>.toml",
		DataDir: "/srv/blue line", User: "blueline", LogFile: "/Users/a&b/Library/Logs/Blueline/blueline.log",
	}
	unit, err := renderSystemdUnit(odd)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`ExecStart="/opt/Blue Line/blueline" serve --config "/etc/blue line/a&b<c>.toml"`,
		`WorkingDirectory=/srv/blue line`, `ReadWritePaths="/srv/blue line"`,
	} {
		if !strings.Contains(unit, want+"\n") {
			t.Errorf("unit lacks %q:\n%s", want, unit)
		}
	}
	plist, err := renderLaunchdPlist(odd)
	if err != nil {
		t.Fatal(err)
	}
	checkPlist(t, plist)
	if !strings.Contains(plist, "<string>/etc/blue line/a&amp;b&lt;c&gt;.toml</string>") {
		t.Errorf("the plist does not escape the configuration path:\n%s", plist)
	}

	for _, bad := range []string{"relative/blueline", "/opt/100%/blueline", "/opt/$HOME/blueline", `/opt/a"b`, "/opt/a\nb", "/opt/{{.Name}}"} {
		u := debUnit
		u.Binary = bad
		if _, err := renderSystemdUnit(u); err == nil {
			t.Errorf("systemd unit with binary %q: no error", bad)
		}
		if _, err := renderLaunchdPlist(unitSpec{Name: launchdLabel, Binary: bad, Config: "/c", DataDir: "/d", LogFile: "/l"}); err == nil {
			t.Errorf("plist with binary %q: no error", bad)
		}
	}
	u := debUnit
	u.User = ""
	if _, err := renderSystemdUnit(u); err == nil {
		t.Error("a system unit without a user: no error")
	}
}

// The launchctl commands that replace load and unload on recent macOS.
func TestLaunchctlFallback(t *testing.T) {
	plist := "/Users/alice/Library/LaunchAgents/app.blueline.daemon.plist"
	got := launchctlStartArgs(501, launchdLabel, plist)
	want := [][]string{
		{"launchctl", "enable", "gui/501/app.blueline.daemon"},
		{"launchctl", "bootstrap", "gui/501", plist},
	}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("start: %q, want %q", got, want)
	}
	got = launchctlStopArgs(502, launchdLabel)
	want = [][]string{{"launchctl", "bootout", "gui/502/app.blueline.daemon"}}
	if !reflect.DeepEqual(want, got) {
		t.Errorf("stop: %q, want %q", got, want)
	}
}

func systemdRunning() bool {
	_, err := os.Stat("/run/systemd/system")
	return err == nil
}

// install, start, status, stop, uninstall, for real, where the platform
// allows it: on Linux in a private systemd user manager whose unit folder is
// a temporary one (needs systemd as PID 1); on macOS, with
// BLUELINE_TEST_LAUNCHD=1, as a LaunchAgent with a test label in
// ~/Library/LaunchAgents (removed at the end).
func TestServiceLifecycle(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs a service manager")
	}
	var s *serviceSetup
	var out bytes.Buffer
	switch runtime.GOOS {
	case "linux":
		privateUserManager(t)
		s = &serviceSetup{goos: "linux", userService: true, out: &out,
			unit: unitSpec{Name: "blueline-lifecycle-test", UserManager: true}}
	case "darwin":
		if os.Getenv("BLUELINE_TEST_LAUNCHD") != "1" {
			t.Skip("installs a LaunchAgent in ~/Library/LaunchAgents: set BLUELINE_TEST_LAUNCHD=1 to run it")
		}
		s = &serviceSetup{goos: "darwin", userService: true, uid: os.Getuid(), out: &out,
			unit: unitSpec{Name: launchdLabel + ".lifecycle-test", LogFile: filepath.Join(t.TempDir(), "blueline.log")}}
	default:
		t.Skipf("no service support on %s", runtime.GOOS)
	}
	bin := buildBinary(t)
	dir := t.TempDir()
	cfgPath, dataDir := filepath.Join(dir, "blueline.toml"), filepath.Join(dir, "data")
	writeFile(t, cfgPath, fmt.Sprintf("[server]\nlisten = \"127.0.0.1:0\"\n[storage]\ndir = %q\n[sandbox]\nhandle = \"+15550000000\"\n", dataDir))
	// The working directory must exist (`blueline install` creates it).
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	s.unit.Binary, s.unit.Config, s.unit.DataDir = bin, cfgPath, dataDir
	path, err := s.path()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Cleanup(func() {
		if _, err := os.Stat(path); err == nil {
			s.control(ctx, "uninstall")
		}
	})
	state := func() string {
		svc, err := s.service()
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.state(svc)
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	do := func(action string) {
		t.Helper()
		out.Reset()
		if err := s.control(ctx, action); err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		t.Logf("%s: %s", action, strings.TrimSpace(out.String()))
	}

	if st := state(); st != stateNotInstalled {
		t.Fatalf("before install: %s", st)
	}
	do("install")
	written, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := renderSystemdUnit(s.unit)
	if s.goos == "darwin" {
		want, err = renderLaunchdPlist(s.unit)
	}
	if err != nil || string(written) != want {
		t.Fatalf("installed file %s differs from the rendered one (%v):\n%s", path, err, written)
	}
	if err := s.control(ctx, "status"); err == nil || !strings.HasPrefix(err.Error(), stateStopped) {
		t.Fatalf("status after install: %v", err)
	}

	do("start")
	testkit.Eventually(t, 20*time.Second, func() bool {
		code := Run(ctx, Build{}, []string{"keys", "list", "--config", cfgPath}, nil, io.Discard, io.Discard)
		return code == 0 && state() == stateRunning
	})
	do("status")
	if !strings.HasPrefix(out.String(), "running") {
		t.Fatalf("status: %q", out.String())
	}

	do("stop")
	testkit.Eventually(t, 20*time.Second, func() bool { return state() == stateStopped })
	db, err := storage.Open(dataDir) // the stopped daemon released it
	if err != nil {
		t.Fatalf("after stop: %v", err)
	}
	db.Close()

	do("uninstall")
	if st := state(); st != stateNotInstalled {
		t.Fatalf("after uninstall: %s", st)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("after uninstall %s: %v", path, err)
	}
}

// privateUserManager starts a systemd user manager of this test's own, with
// its home, configuration and runtime folders in a temporary folder, and
// points systemctl --user at it; or skips the test where that cannot run.
func privateUserManager(t *testing.T) {
	t.Helper()
	if !systemdRunning() {
		comm, _ := os.ReadFile("/proc/1/comm")
		t.Skipf("systemd is not running as PID 1 (PID 1 is %q): no service manager to install into", strings.TrimSpace(string(comm)))
	}
	bin := ""
	for _, p := range []string{"/usr/lib/systemd/systemd", "/lib/systemd/systemd"} {
		if _, err := os.Stat(p); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Skip("no systemd binary to run a user manager with")
	}
	dir := t.TempDir()
	home, rundir := filepath.Join(dir, "home"), filepath.Join(dir, "run")
	for _, d := range []string{filepath.Join(home, ".config"), rundir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	t.Setenv("XDG_RUNTIME_DIR", rundir)
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	os.Unsetenv("DBUS_SESSION_BUS_ADDRESS") // systemctl --user then uses $XDG_RUNTIME_DIR/systemd/private

	manager := exec.Command(bin, "--user")
	var logs bytes.Buffer
	manager.Stdout, manager.Stderr = &logs, &logs
	if err := manager.Start(); err != nil {
		t.Skipf("cannot run a systemd user manager: %v", err)
	}
	done := make(chan struct{})
	go func() { manager.Wait(); close(done) }()
	t.Cleanup(func() {
		manager.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			manager.Process.Kill()
			<-done
		}
	})
	ready := regexp.MustCompile(`^(running|degraded|starting)`)
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, _ := exec.Command("systemctl", "--user", "is-system-running").Output()
		if ready.Match(out) {
			return
		}
		select {
		case <-done:
			t.Skipf("a private systemd user manager exited at start: %s", logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Skipf("a private systemd user manager did not come up (%s): %s", strings.TrimSpace(string(out)), logs.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// detected is a service system taken to be present.
type detected struct{ service.System }

func (detected) Detect() bool { return true }

// The order of systemctl commands behind each action, against a stand-in
// systemctl that only keeps state (so it runs wherever Linux does; the real
// thing is TestServiceLifecycle).
func TestServiceControlSystemctl(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the systemd unit is Linux's")
	}
	restore := service.AvailableSystems()
	var systemd service.System
	for _, s := range restore {
		if s.String() == "linux-systemd" {
			systemd = s
		}
	}
	if systemd == nil {
		t.Fatal("kardianos/service has no linux-systemd")
	}
	service.ChooseSystem(detected{systemd})
	t.Cleanup(func() { service.ChooseSystem(restore...) })

	dir := t.TempDir()
	home, bin, calls := filepath.Join(dir, "home"), filepath.Join(dir, "bin"), filepath.Join(dir, "calls")
	for _, d := range []string{home, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const fake = `#!/bin/sh
echo "$*" >> "$FAKE_CALLS"
action=$1; unit=$2; [ "$unit" = --user ] && unit=$3
case $action in
--version) echo "systemd 252" ;;
is-active) if [ -e "$FAKE_CALLS.active" ]; then echo active; else echo inactive; exit 3; fi ;;
list-unit-files) if [ -e "$HOME/.config/systemd/user/$4" ]; then echo "$4 enabled"; else echo "0 unit files listed."; exit 1; fi ;;
start|restart) touch "$FAKE_CALLS.active" ;;
stop) rm -f "$FAKE_CALLS.active" ;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	t.Setenv("HOME", home)
	t.Setenv("FAKE_CALLS", calls)

	var out bytes.Buffer
	s := &serviceSetup{goos: "linux", userService: true, out: &out, unit: unitSpec{
		Name: "blueline-x", Binary: "/usr/bin/blueline", Config: "/etc/blueline/blueline.toml", DataDir: "/var/lib/blueline", UserManager: true,
	}}
	ctx := context.Background()
	step := func(action string, want ...string) {
		t.Helper()
		os.Remove(calls)
		if err := s.control(ctx, action); err != nil {
			t.Fatalf("%s: %v", action, err)
		}
		got, _ := os.ReadFile(calls)
		var changes []string // the calls that change something
		for _, c := range strings.Split(strings.TrimSpace(string(got)), "\n") {
			if !strings.HasPrefix(c, "is-active") && !strings.HasPrefix(c, "list-unit-files") && c != "--version" {
				changes = append(changes, c)
			}
		}
		if !reflect.DeepEqual(changes, want) {
			t.Errorf("%s ran %q, want %q", action, changes, want)
		}
	}
	status := func() error { return s.control(ctx, "status") }

	step("install", "enable --user blueline-x.service", "daemon-reload --user")
	unit, _ := renderSystemdUnit(s.unit)
	if got, err := os.ReadFile(filepath.Join(home, ".config/systemd/user/blueline-x.service")); err != nil || string(got) != unit {
		t.Fatalf("installed unit (%v):\n%s", err, got)
	}
	if err := s.control(ctx, "install"); err == nil || !strings.Contains(err.Error(), "already installed") {
		t.Errorf("second install: %v", err)
	}
	if err := status(); err == nil || !strings.HasPrefix(err.Error(), "stopped") {
		t.Errorf("status after install: %v", err)
	}
	step("start", "start --user blueline-x.service")
	out.Reset()
	if err := status(); err != nil || !strings.HasPrefix(out.String(), "running (") {
		t.Errorf("status after start: %v (%q)", err, out.String())
	}
	step("start") // already running: nothing to do
	step("restart", "restart --user blueline-x.service")
	step("stop", "stop --user blueline-x.service")
	step("stop")
	step("start", "start --user blueline-x.service")
	// Uninstalling a running service stops it first.
	step("uninstall", "stop --user blueline-x.service", "disable --user blueline-x.service", "daemon-reload --user")
	if err := status(); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("status after uninstall: %v", err)
	}
	if err := s.control(ctx, "start"); err == nil || !strings.Contains(err.Error(), "not installed") {
		t.Errorf("start when not installed: %v", err)
	}
}

// What the .deb installs besides the unit: the configuration make-config.sh
// derives from config.example.toml, the maintainer scripts, and every file
// .goreleaser.yaml names. (.ci/run runs goreleaser itself: packaging/check.sh.)
func TestPackagingFiles(t *testing.T) {
	out := filepath.Join(t.TempDir(), "blueline.toml")
	if msg, err := exec.Command("sh", filepath.Join(root, "packaging/linux/make-config.sh"), out).CombinedOutput(); err != nil {
		t.Fatalf("make-config.sh: %v: %s", err, msg)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(out, data)
	if err != nil {
		t.Fatalf("the packaged configuration: %v", err)
	}
	if cfg.Storage.Dir != debUnit.DataDir {
		t.Errorf("the packaged configuration keeps its data in %q, the unit lets it write %q", cfg.Storage.Dir, debUnit.DataDir)
	}
	example, _ := os.ReadFile(filepath.Join(root, "config.example.toml"))
	if strings.Count(string(example), "\n") != strings.Count(string(data), "\n") {
		t.Errorf("make-config.sh changed more than the data folder")
	}

	for _, script := range []string{"postinstall.sh", "preremove.sh", "postremove.sh", "make-config.sh"} {
		if msg, err := exec.Command("sh", "-n", filepath.Join(root, "packaging/linux", script)).CombinedOutput(); err != nil {
			t.Errorf("%s: %v: %s", script, err, msg)
		}
	}

	yaml, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	named := regexp.MustCompile(`(?m)^\s+(?:- )?(?:src|postinstall|preremove|postremove): (\S+)$`).FindAllStringSubmatch(string(yaml), -1)
	if len(named) < 5 {
		t.Fatalf("found only %d files named in .goreleaser.yaml", len(named))
	}
	for _, m := range named {
		if m[1] == "packaging/linux/blueline.toml" {
			continue // written by the before hook, make-config.sh
		}
		if _, err := os.Stat(filepath.Join(root, m[1])); err != nil {
			t.Errorf(".goreleaser.yaml names %s: %v", m[1], err)
		}
	}
	for _, want := range []string{
		"dst: /usr/lib/systemd/system/blueline.service", "dst: /etc/blueline/blueline.toml", "type: config|noreplace",
		"dst: /var/lib/blueline", "-X main.version={{.Version}} -X main.commit={{.Commit}} -X main.date={{.Date}}",
		"CGO_ENABLED=0", "sh packaging/linux/make-config.sh packaging/linux/blueline.toml",
	} {
		if !strings.Contains(string(yaml), want) {
			t.Errorf(".goreleaser.yaml lacks %q", want)
		}
	}

	// The formula's service is the LaunchAgent `blueline install` writes,
	// under its label, so that start, stop and status manage either.
	formula, err := os.ReadFile(filepath.Join(root, "packaging/homebrew/blueline.rb"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`name macos: "` + launchdLabel + `"`, `"serve", "--config", "~/Library/Application Support/Blueline/blueline.toml"`,
		"keep_alive true", `log_path "~/Library/Logs/Blueline/blueline.log"`,
	} {
		if !strings.Contains(string(formula), want) {
			t.Errorf("packaging/homebrew/blueline.rb lacks %q", want)
		}
	}
}

// buildBinary builds blueline the way the README says, into a temp folder.
func buildBinary(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "blueline")
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}
