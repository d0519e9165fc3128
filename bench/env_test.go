package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/config"
)

func TestNewEnv(t *testing.T) {
	dir := t.TempDir()
	e, err := newEnv(dir, 3)
	if err != nil {
		t.Fatal(err)
	}
	if e.dataDir != filepath.Join(dir, "data") || e.dbPath() != filepath.Join(dir, "data", "db.bolt") || e.bin != filepath.Join(dir, "blueline") {
		t.Errorf("paths %+v", e)
	}
	if !strings.HasPrefix(e.addr, "127.0.0.1:") || e.addr == "127.0.0.1:0" {
		t.Errorf("address %q, want a loopback port", e.addr)
	}
	if e.cfg.Server.Listen != e.addr || e.cfg.Delivery.Workers != 3 || e.cfg.Limits.RequestsPerHour != 0 {
		t.Errorf("config: listen %q, workers %d, requests_per_hour %d", e.cfg.Server.Listen, e.cfg.Delivery.Workers, e.cfg.Limits.RequestsPerHour)
	}
	if len(e.lines) != 1 || e.lines[0].Handle != lineHandle || e.lines[0].Bridge != "sim" || e.lines[0].Service != "imessage" {
		t.Errorf("lines %+v", e.lines)
	}
	// The daemon's default workers when none are asked for.
	e0, err := newEnv(t.TempDir(), 0)
	if err != nil {
		t.Fatal(err)
	}
	if e0.cfg.Delivery.Workers != config.Default().Delivery.Workers {
		t.Errorf("workers %d, want the default %d", e0.cfg.Delivery.Workers, config.Default().Delivery.Workers)
	}
	if _, err := newEnv(filepath.Join(dir, "missing"), 0); err == nil {
		t.Error("newEnv in a missing folder: no error")
	}

	// allowUploads raises the upload limit, never lowers it.
	if err := allowUploads(e, 5<<30); err != nil {
		t.Fatal(err)
	}
	if e.cfg.Files.MaxUploadBytes != 5<<30 {
		t.Errorf("max_upload_bytes %d after allowing 5 GiB", e.cfg.Files.MaxUploadBytes)
	}
	if err := allowUploads(e0, 1); err != nil {
		t.Fatal(err)
	}
	if e0.cfg.Files.MaxUploadBytes != config.Default().Files.MaxUploadBytes {
		t.Errorf("max_upload_bytes %d after allowing 1 byte", e0.cfg.Files.MaxUploadBytes)
	}
	if err := allowUploads(&env{cfgPath: filepath.Join(dir, "missing.toml")}, 1); err == nil {
		t.Error("allowUploads without a config: no error")
	}
}

func TestRepoRootAndTempDir(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if !fileExists(filepath.Join(root, "go.mod")) || !fileExists(filepath.Join(root, "bench", "main.go")) || fileExists(filepath.Join(root, "no-such-file")) {
		t.Errorf("root %s", root)
	}

	var tmp string
	err = inTempDir(options{}, func(r, dir string) error {
		tmp = dir
		if r != root {
			t.Errorf("root %s, want %s", r, root)
		}
		return os.WriteFile(filepath.Join(dir, "x"), nil, 0o600)
	})
	if err != nil || tmp == "" {
		t.Fatalf("inTempDir: %v", err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the temporary folder %s was kept: %v", tmp, err)
	}
	boom := errors.New("boom")
	err = inTempDir(options{keep: true}, func(_, dir string) error { tmp = dir; return boom })
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if !errors.Is(err, boom) {
		t.Errorf("inTempDir returned %v, want fn's error", err)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Errorf("-keep: the folder is gone: %v", err)
	}

	// Outside the repository there is no root.
	t.Chdir(t.TempDir())
	if _, err := repoRoot(); err == nil {
		t.Error("repoRoot outside the repository: no error")
	}
	if err := inTempDir(options{}, func(string, string) error { return nil }); err == nil {
		t.Error("inTempDir outside the repository: no error")
	}
	if _, err := runAll(t.Context(), registry[:1], true, io.Discard); err == nil {
		t.Error("runAll outside the repository: no error")
	}
}

// captureStdout runs fn with os.Stdout going to a file, and returns what
// it wrote.
func captureStdout(t *testing.T, fn func()) string {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stdout"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	saved := os.Stdout
	os.Stdout = f
	defer func() { os.Stdout = saved }()
	fn()
	data, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestMainAllList(t *testing.T) {
	var code int
	out := captureStdout(t, func() { code = mainAll([]string{"-list", "-quick", "-only", "^(typedstream|files-load)$"}) })
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	want := fmt.Sprintf("%-22s %s\n%-22s %s\n", "typedstream", "go test -run '^$' -bench '^Benchmark(Text|Encode)$' -benchtime 100x ./bridge/messages/typedstream",
		"files-load", "go run ./bench -files 32MiB")
	if out != want {
		t.Errorf("-list printed\n%s\nwant\n%s", out, want)
	}
	saved := os.Stderr
	null, _ := os.Open(os.DevNull)
	os.Stderr = null
	defer func() { os.Stderr = saved; null.Close() }()
	for _, args := range [][]string{{"-only", "("}, {"-only", "no-such-entry"}, {"stray"}, {"-bogus"}} {
		if code := mainAll(args); code != 2 {
			t.Errorf("mainAll(%q) = %d, want 2", args, code)
		}
	}
}

func TestEntryArgs(t *testing.T) {
	if got := entryArgs(registry[0], true); got[0] != "go" || got[1] != "test" || got[len(got)-1] != registry[0].Pkg {
		t.Errorf("a Go benchmark's args %q", got)
	}
	if got := entryArgs(entry{Args: []string{"-files", "1GiB"}}, false); strings.Join(got, " ") != "go run ./bench -files 1GiB" {
		t.Errorf("a load entry's args %q", got)
	}
}

func TestRunAllStopsWhenCanceled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	rows, err := runAll(ctx, registry, true, io.Discard)
	if len(rows) != 0 || !errors.Is(err, context.Canceled) {
		t.Errorf("canceled runAll: %d rows, %v", len(rows), err)
	}
	// A load entry whose flags are wrong fails before it runs anything,
	// and still gets its row.
	rows, err = runAll(t.Context(), []entry{{Name: "broken", Measures: "m", Args: []string{"-clients", "0"}}}, false, io.Discard)
	if err == nil || len(rows) != 1 || !strings.HasPrefix(rows[0].Figures, "FAILED: ") || rows[0].Command != "go run ./bench -clients 0" {
		t.Errorf("a broken entry: %+v, %v", rows, err)
	}
}

// startProc runs script under sh as the bench's daemon subprocess would
// run, its output in e's log.
func startProc(t *testing.T, e *env, script string) *daemon {
	t.Helper()
	logf, err := os.Create(e.logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", script)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemon{env: e, cmd: cmd, log: logf, exited: make(chan struct{})}
	go func() {
		d.waitErr = cmd.Wait()
		close(d.exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-d.exited
	})
	return d
}

// stop's three outcomes, on real processes: a clean exit on SIGTERM, a
// process that ignores it (killed at the limit), one already gone.
func TestDaemonStop(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	dir := t.TempDir()
	e := &env{dir: dir, logPath: filepath.Join(dir, "daemon.log")}

	clean := startProc(t, e, `trap 'echo bye; exit 0' TERM; echo ready; while :; do sleep 0.01; done`)
	waitLog(t, e, "ready")
	if clean.pid() <= 0 {
		t.Errorf("pid %d", clean.pid())
	}
	took, err := clean.stop(10 * time.Second)
	if err != nil || took <= 0 {
		t.Errorf("a clean stop: %s, %v", took, err)
	}
	if got := clean.logTail(5); got != "ready\nbye" {
		t.Errorf("log %q", got)
	}
	if _, err := clean.stop(time.Second); err == nil || !strings.Contains(err.Error(), "already exited") {
		t.Errorf("stopping a stopped daemon: %v", err)
	}

	stubborn := startProc(t, e, `trap '' TERM; echo ready; while :; do sleep 0.01; done`)
	waitLog(t, e, "ready")
	if took, err := stubborn.stop(200 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") || took < 200*time.Millisecond {
		t.Errorf("a process ignoring SIGTERM: %s, %v", took, err)
	}

	failing := startProc(t, e, `trap 'exit 3' TERM; echo ready; while :; do sleep 0.01; done`)
	waitLog(t, e, "ready")
	if _, err := failing.stop(10 * time.Second); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("a daemon exiting 3: %v", err)
	}
}

// waitLog polls e's log for a line, with a deadline.
func waitLog(t *testing.T, e *env, line string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		data, _ := os.ReadFile(e.logPath)
		if strings.Contains(string(data), line) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the log never said %q: %q", line, data)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestLogTail(t *testing.T) {
	dir := t.TempDir()
	d := &daemon{env: &env{logPath: filepath.Join(dir, "daemon.log")}}
	if d.logTail(5) != "" {
		t.Error("a missing log has a tail")
	}
	log := "No API key exists yet.\nIn another terminal, run:\n  blueline keys create --label me\n\n" +
		"level=WARN msg=one\nlevel=WARN msg=two\nlevel=WARN msg=three\n"
	os.WriteFile(d.env.logPath, []byte(log), 0o600)
	if got := d.logTail(2); got != "level=WARN msg=two\nlevel=WARN msg=three" {
		t.Errorf("logTail(2) = %q", got)
	}
	if got := d.logTail(10); got != "level=WARN msg=one\nlevel=WARN msg=two\nlevel=WARN msg=three" {
		t.Errorf("logTail(10) = %q", got)
	}
}

func TestFreeLoopbackAddr(t *testing.T) {
	a, err := freeLoopbackAddr()
	if err != nil || !strings.HasPrefix(a, "127.0.0.1:") {
		t.Errorf("freeLoopbackAddr = %q, %v", a, err)
	}
}
