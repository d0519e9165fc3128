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
	"regexp"
	"syscall"
	"time"
)

// mainAll is `go run ./bench all [-quick] [-only REGEXP]`: every registry
// entry in turn, each one's own output on stderr, then one markdown table on
// stdout. It returns the exit code: 1 when any entry failed (the table still
// shows what the others measured).
func mainAll(args []string) int {
	fs := flag.NewFlagSet("bench all", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "tiny sizes and benchtimes: a smoke check that every benchmark still runs, not figures to quote")
	only := fs.String("only", "", "run only the entries whose name matches this `regexp`")
	list := fs.Bool("list", false, "list the entries and their commands without running them")
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "bench all: unexpected arguments:", fs.Args())
		return 2
	}
	entries, err := selectEntries(registry, *only)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench all:", err)
		return 2
	}
	if *list {
		for _, e := range entries {
			fmt.Printf("%-22s %s\n", e.Name, commandLine(entryEnv(e, *quick), entryArgs(e, *quick)))
		}
		return 0
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rows, err := runAll(ctx, entries, *quick, os.Stderr)
	fmt.Println()
	printTable(os.Stdout, rows)
	if err != nil {
		slog.Error("bench all: some benchmarks failed", "err", err)
		return 1
	}
	return 0
}

// selectEntries keeps the entries whose name matches only ("" keeps all).
func selectEntries(all []entry, only string) ([]entry, error) {
	re, err := regexp.Compile(only)
	if err != nil {
		return nil, fmt.Errorf("-only: %w", err)
	}
	var out []entry
	for _, e := range all {
		if re.MatchString(e.Name) {
			out = append(out, e)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("-only %q matches no benchmark", only)
	}
	return out, nil
}

// entryArgs is an entry's command line without its environment.
func entryArgs(e entry, quick bool) []string {
	if e.Pkg == "" {
		return loadArgs(e, quick)
	}
	return goTestArgs(e, quick)
}

// runAll runs the entries one after the other (the machine is small: two
// at once would measure each other) and keeps going past a failure.
func runAll(ctx context.Context, entries []entry, quick bool, progress io.Writer) ([]row, error) {
	root, err := repoRoot()
	if err != nil {
		return nil, err
	}
	var rows []row
	var errs []error
	for _, e := range entries {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		command := commandLine(entryEnv(e, quick), entryArgs(e, quick))
		slog.Info("running", "benchmark", e.Name, "command", command)
		start := time.Now()
		var rs []result
		if e.Pkg == "" {
			rs, err = runLoad(ctx, e, quick, progress)
		} else {
			rs, err = runGoBench(ctx, root, e, quick, progress)
		}
		slog.Info("done", "benchmark", e.Name, "took", time.Since(start).Round(time.Second), "err", err)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Name, err))
		}
		rows = append(rows, rowsFor(e, command, rs, err)...)
	}
	return rows, errors.Join(errs...)
}

// runLoad runs a load tool entry in this process, its detailed report on
// progress, and returns its headline figures.
func runLoad(ctx context.Context, e entry, quick bool, progress io.Writer) ([]result, error) {
	o, err := parseOptions(loadArgs(e, quick)[3:], newSilentFlagSet())
	if err != nil {
		return nil, err
	}
	o.out = progress
	if o.files > 0 {
		r, err := runFiles(ctx, o)
		return filesResults(r), err
	}
	r, err := run(ctx, o)
	return messageResults(r), err
}

// newSilentFlagSet parses a registry entry's flags: an error is returned,
// not printed with the usage.
func newSilentFlagSet() *flag.FlagSet {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}
