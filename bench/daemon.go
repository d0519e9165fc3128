package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/storage"
)

// The line the daemon serves and the two simulated contacts whose chats are
// seeded: contactSmall's chat is small and is also where POSTs go (it has
// written to the line, so the contact-first rule lets the line answer);
// contactBig's chat holds the big history.
const (
	lineHandle   = "+15550000001"
	contactSmall = "+15550100001"
	contactBig   = "+15550100002"
)

// env is the temporary installation: data folder, config file, binary and
// the loopback address the daemon will listen on.
type env struct {
	dir     string
	dataDir string
	cfgPath string
	bin     string
	logPath string
	addr    string
	cfg     *config.Config
	// lines to register before seeding. Only the handle matters: the
	// daemon's start rewrites each line's record from its config and keeps
	// the ID the handle was given here.
	lines []storage.Line
}

func newEnv(dir string, workers int) (*env, error) {
	e := &env{
		dir:     dir,
		dataDir: filepath.Join(dir, "data"),
		cfgPath: filepath.Join(dir, "blueline.toml"),
		bin:     filepath.Join(dir, "blueline"),
		logPath: filepath.Join(dir, "daemon.log"),
	}
	addr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	e.addr = addr
	// Requests are not rate limited (0): the bench is one key sending far
	// more than a person would. Nothing else is relaxed; in particular
	// every accepted write is still fsynced before it is answered.
	toml := fmt.Sprintf(`# Written by blueline's bench tool.
[server]
listen = %q

[storage]
dir = %q

[[lines]]
handle = %q
label = "Bench line"
bridge = "sim"
service = "imessage"
advanced_features = true

[limits]
requests_per_hour = 0

[log]
level = "warn"
`, e.addr, e.dataDir, lineHandle)
	if workers > 0 {
		toml += fmt.Sprintf("\n[delivery]\nworkers = %d\n", workers)
	}
	if err := os.WriteFile(e.cfgPath, []byte(toml), 0o600); err != nil {
		return nil, fmt.Errorf("write config: %w", err)
	}
	// Reading it back through the config package gives the handles and
	// defaults exactly as the daemon will see them.
	cfg, err := config.Load(e.cfgPath)
	if err != nil {
		return nil, fmt.Errorf("bench config: %w", err)
	}
	e.cfg = cfg
	for _, l := range cfg.Lines {
		e.lines = append(e.lines, storage.Line{Handle: l.Handle, Service: l.Service, Bridge: l.Bridge})
	}
	return e, nil
}

// freeLoopbackAddr picks a free port by letting the kernel choose one and
// releasing it. Another process could take it before the daemon starts;
// on a bench machine that race is not worth more machinery.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("pick a port: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

func (e *env) dbPath() string { return filepath.Join(e.dataDir, "db.bolt") }

func (e *env) build(ctx context.Context, root string) error {
	start := time.Now()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", e.bin, ".")
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build the daemon in %s: %w\n%s", root, err, out.Bytes())
	}
	slog.Info("daemon built", "bin", e.bin, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// daemon is the running `blueline serve` subprocess.
type daemon struct {
	env     *env
	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{} // closed once cmd.Wait has returned
	waitErr error
	key     string
}

func (e *env) start(ctx context.Context) (_ *daemon, err error) {
	logf, err := os.Create(e.logPath)
	if err != nil {
		return nil, fmt.Errorf("daemon log: %w", err)
	}
	// Not CommandContext: on Ctrl-C the daemon gets SIGTERM from stop and
	// a chance to close its database, not an immediate SIGKILL.
	cmd := exec.Command(e.bin, "serve", "--config", e.cfgPath)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start the daemon: %w", err)
	}
	d := &daemon{env: e, cmd: cmd, log: logf, exited: make(chan struct{})}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	defer func() {
		if err != nil {
			d.stop(5 * time.Second)
			if tail := d.logTail(20); tail != "" {
				err = fmt.Errorf("%w\ndaemon log:\n%s", err, tail)
			}
		}
	}()
	if err := d.waitReady(ctx, 30*time.Second); err != nil {
		return d, err
	}
	key, err := d.admin(ctx, "keys", "create", "--label", "bench", "--owner", "bench")
	if err != nil {
		return d, fmt.Errorf("create an API key: %w", err)
	}
	d.key = strings.TrimSpace(key)
	if !strings.HasPrefix(d.key, "sk_") {
		return d, fmt.Errorf("keys create printed %q, not a key", d.key)
	}
	return d, nil
}

func (d *daemon) pid() int { return d.cmd.Process.Pid }

// waitReady polls the admin socket with `keys list`: it answers only once
// the daemon has opened the database and is serving.
func (d *daemon) waitReady(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var last error
	for time.Now().Before(deadline) {
		select {
		case <-d.exited:
			return fmt.Errorf("the daemon exited during start: %v", d.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		default:
		}
		if _, last = d.admin(ctx, "keys", "list"); last == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the daemon was not ready within %s: %w", limit, last)
}

// admin runs an admin subcommand of the daemon binary against the running
// daemon and returns its standard output.
func (d *daemon) admin(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	args = append(args, "--config", d.env.cfgPath)
	cmd := exec.CommandContext(ctx, d.env.bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("blueline %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// stop sends SIGTERM and waits up to limit for the daemon to exit, then
// kills it. It returns how long the graceful exit took.
func (d *daemon) stop(limit time.Duration) (time.Duration, error) {
	defer d.log.Close()
	select {
	case <-d.exited:
		return 0, fmt.Errorf("the daemon had already exited: %v", d.waitErr)
	default:
	}
	start := time.Now()
	if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return 0, fmt.Errorf("SIGTERM: %w", err)
	}
	select {
	case <-d.exited:
		took := time.Since(start)
		var exit *exec.ExitError
		if errors.As(d.waitErr, &exit) {
			return took, fmt.Errorf("the daemon exited with %v", d.waitErr)
		}
		return took, d.waitErr
	case <-time.After(limit):
		d.cmd.Process.Kill()
		<-d.exited
		return time.Since(start), fmt.Errorf("the daemon did not exit within %s of SIGTERM; killed", limit)
	}
}

// logTail returns the last n lines the daemon wrote to its log.
func (d *daemon) logTail(n int) string {
	data, err := os.ReadFile(d.env.logPath)
	if err != nil {
		return ""
	}
	var lines []string
	for _, l := range strings.Split(string(data), "\n") {
		// serve's start-up hint about creating a first key is for people,
		// and the bench creates one right after; keep only real log lines.
		if t := strings.TrimSpace(l); t == "" || strings.HasPrefix(t, "No API key exists yet") ||
			strings.HasPrefix(t, "In another terminal") || strings.HasPrefix(t, "blueline keys create") {
			continue
		}
		lines = append(lines, l)
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}
