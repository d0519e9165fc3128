// Command bench measures a real Blueline daemon on this machine: sustained
// POST /v1/messages throughput against the same load on a hello-world
// handler, and GET /v1/messages page latency on a small and a very large
// chat. Run it from the repository root:
//
//	go run ./bench
//	go run ./bench -big 100000 -duration 5s
//	go run ./bench -files 1GiB
//
// With -files it instead uploads and downloads one file of that size and
// compares the daemon with cp on the same disk (see files.go).
//
//	go run ./bench all [-quick] [-only REGEXP] [-list]
//
// runs every benchmark of the project, this tool's two modes and every Go
// benchmark listed in registry.go, and prints one markdown table (all.go).
//
// It seeds a temporary data folder through the same storage and delivery
// code the daemon uses, builds the daemon binary, starts it on a free
// loopback port, drives it over HTTP, stops it with SIGTERM and prints a
// results table on stdout. Progress goes to stderr through log/slog.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

// options are the command-line flags.
type options struct {
	duration time.Duration
	warmup   time.Duration
	clients  int
	big      int
	small    int
	gets     int
	seeders  int
	drain    time.Duration
	workers  int
	keep     bool
	files    int64 // -files: bytes of the file to upload and download; 0 runs the message benchmarks
	// out receives the detailed results: stdout alone, stderr under `all`,
	// whose summary table owns stdout.
	out io.Writer
}

// parseOptions reads the load tool's flags into fs; `all` reads each
// registry entry's flags with it too, so both take the same arguments.
func parseOptions(args []string, fs *flag.FlagSet) (options, error) {
	o := options{out: os.Stdout}
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured duration of each POST load, after the warm-up")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up before each POST load is measured")
	fs.IntVar(&o.clients, "clients", 64, "concurrent clients for the POST loads")
	fs.IntVar(&o.big, "big", 1_000_000, "messages in the big chat")
	fs.IntVar(&o.small, "small", 1000, "messages in the small chat (also the chat POSTs go to)")
	fs.IntVar(&o.gets, "gets", 2000, "sequential GET requests per chat")
	fs.IntVar(&o.seeders, "seeders", 64, "goroutines recording seed messages (bbolt group-commits them)")
	fs.DurationVar(&o.drain, "drain", 2*time.Minute, "how long to wait for the delivery worker to send the POSTed backlog")
	fs.IntVar(&o.workers, "workers", 0, "the daemon's [delivery] workers; 0 keeps the daemon's default")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary folder (data, config, daemon log, binary)")
	fs.Func("files", "instead of the message benchmarks, upload and download one file of this `size` (1GiB, 512MiB, 100MB, bytes)", func(s string) (err error) {
		o.files, err = parseSize(s)
		return err
	})
	if err := fs.Parse(args); err != nil {
		return o, fmt.Errorf("flags: %w", err)
	}
	if fs.NArg() > 0 || o.clients < 1 || o.small < 1 || o.big < 1 || o.gets < 2 || o.seeders < 1 || o.workers < 0 || o.duration <= 0 || o.warmup < 0 {
		return o, errors.New("bad arguments; want positive -clients, -small, -big, -seeders, -duration and -gets >= 2")
	}
	return o, nil
}

func main() {
	// `all` is a subcommand so that `go run ./bench` with flags alone keeps
	// doing what it always did.
	if len(os.Args) > 1 && os.Args[1] == "all" {
		os.Exit(mainAll(os.Args[2:]))
	}
	o, err := parseOptions(os.Args[1:], flag.CommandLine)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		flag.Usage()
		os.Exit(2)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))

	// Ctrl-C still runs the deferred cleanup: the daemon is stopped and the
	// temporary folder removed.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	if o.files > 0 {
		_, err = runFiles(ctx, o)
	} else {
		_, err = run(ctx, o)
	}
	stop()
	if err != nil {
		slog.Error("bench failed", "err", err)
		os.Exit(1)
	}
}

// repoRoot finds the module root. The tool is meant to be run as
// `go run ./bench` from the root, but running it from inside bench/ works
// too: the root is then the bench folder's parent.
func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("working directory: %w", err)
	}
	for _, dir := range []string{wd, filepath.Dir(wd)} {
		if fileExists(filepath.Join(dir, "go.mod")) && fileExists(filepath.Join(dir, "bench", "main.go")) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("run from the repository root (go run ./bench); %s has no go.mod next to a bench folder", wd)
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// inTempDir runs fn with the repository root and a new temporary folder,
// removed afterwards unless -keep.
func inTempDir(o options, fn func(root, tmp string) error) (err error) {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "blueline-bench-")
	if err != nil {
		return fmt.Errorf("temporary folder: %w", err)
	}
	defer func() {
		if o.keep {
			slog.Info("kept the temporary folder", "dir", tmp)
			return
		}
		if rmErr := os.RemoveAll(tmp); rmErr != nil {
			err = errors.Join(err, fmt.Errorf("remove %s: %w", tmp, rmErr))
		}
	}()
	return fn(root, tmp)
}

// run is the message benchmarks; the report holds whatever was measured,
// even when err is not nil.
func run(ctx context.Context, o options) (*report, error) {
	// Figures stay "unknown" (-1) if the run fails before taking them.
	r := &report{opts: o, rssAfterStart: rss{-1, -1}, rssAfterLoad: rss{-1, -1}, dbAfterSeed: -1, dbAfterLoad: -1}
	err := inTempDir(o, func(root, tmp string) error { return runMessages(ctx, o, root, tmp, r) })
	return r, err
}

func runMessages(ctx context.Context, o options, root, tmp string, r *report) (err error) {

	env, err := newEnv(tmp, o.workers)
	if err != nil {
		return err
	}
	// The binary builds while the data is seeded: with 2 cores the build
	// costs some seeding speed, but not the minute it would take in series.
	r.workers = env.cfg.Delivery.Workers
	built := make(chan error, 1)
	go func() { built <- env.build(ctx, root) }()

	seedStats, err := seed(ctx, env, o)
	if err != nil {
		<-built
		return err
	}
	r.seed = seedStats
	r.dbAfterSeed = fileSize(env.dbPath())
	if err := <-built; err != nil {
		return err
	}

	d, err := env.start(ctx)
	if err != nil {
		return err
	}
	defer func() {
		// Stop even when the run failed, so no daemon outlives the bench.
		r.shutdown, r.shutdownErr = d.stop(15 * time.Second)
		r.daemonLog = d.logTail(20)
		r.dbAfterLoad = fileSize(env.dbPath())
		r.print(o.out)
	}()
	r.rssAfterStart = rssOf(d.pid())
	slog.Info("daemon ready", "pid", d.pid(), "addr", env.addr, "rss", r.rssAfterStart.String())

	c := newAPIClient("http://"+env.addr, d.key, o.clients)
	for _, chat := range []struct {
		name    string
		contact string
		size    int
	}{
		{thousands(o.small) + " msgs", contactSmall, o.small},
		{thousands(o.big) + " msgs", contactBig, o.big},
	} {
		ps, err := measurePages(ctx, c, chat.contact, chat.size, o.gets)
		if err != nil {
			return err
		}
		ps.name = chat.name
		r.pages = append(r.pages, ps)
	}

	// The hello-world load runs before the daemon's, while the daemon is
	// idle: afterwards its delivery worker is busy sending the backlog,
	// which would steal CPU from the baseline.
	hello, err := startHello()
	if err != nil {
		return err
	}
	helloRes, err := postLoad(ctx, "hello-world handler", newAPIClient(hello.url, d.key, o.clients), o, nil)
	hello.close()
	if err != nil {
		return err
	}
	r.loads = append(r.loads, helloRes)

	r.fsync = probeSync(env.dir, 200)
	daemonRes, err := postLoad(ctx, "blueline daemon", c, o, d)
	if err != nil {
		return err
	}
	r.loads = append(r.loads, daemonRes)
	r.rssAfterLoad = rssOf(d.pid())

	r.drain = waitDrain(ctx, c, daemonRes.accepted, o.drain)
	return nil
}
