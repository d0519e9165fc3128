package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// metric is one figure of a result: a value and its unit, as `go test
// -bench` prints them ("1043 ns/op", "32.5 new-p50-ms").
type metric struct {
	Value float64
	Unit  string
}

// result is one line of benchmark results, or one figure set of the load
// tool. Err is set when it failed.
type result struct {
	Name    string // "Text/message", the Benchmark prefix and -GOMAXPROCS suffix dropped
	Metrics []metric
	Err     string
}

// procsSuffix is the -GOMAXPROCS the testing package appends to a name.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// benchName turns the "BenchmarkText/message-2" of a result line into
// "Text/message". (With GOMAXPROCS=1 there is no suffix, and a name ending
// in "-<digits>" of its own would lose it: none of ours does.)
func benchName(s string) string {
	return strings.TrimPrefix(procsSuffix.ReplaceAllString(s, ""), "Benchmark")
}

// parseFigures reads "N v1 unit1 v2 unit2 …", the part of a result line
// after the name; ok is false when fields are not that.
func parseFigures(fields []string) ([]metric, bool) {
	if len(fields) < 3 || len(fields)%2 == 0 {
		return nil, false
	}
	if _, err := strconv.ParseInt(fields[0], 10, 64); err != nil {
		return nil, false
	}
	var ms []metric
	for i := 1; i < len(fields); i += 2 {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return nil, false
		}
		ms = append(ms, metric{v, fields[i+1]})
	}
	return ms, true
}

// parseBenchOutput reads `go test -bench` output. A result line is a name
// and its figures; when the benchmark's own output lands between them (a
// daemon logging to stdout), the name is followed by that output and the
// figures come later on a line of their own. "--- FAIL: Name" marks a
// failed benchmark.
func parseBenchOutput(r io.Reader) ([]result, error) {
	var (
		out     []result
		pending string // a name printed without its figures yet
	)
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20) // daemon log lines can be long
	for sc.Scan() {
		line := sc.Text()
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case strings.HasPrefix(line, "--- FAIL: Benchmark"):
			// A failure names the benchmark without the -GOMAXPROCS suffix:
			// stripping one could cut a sub-benchmark's own "-64".
			out = append(out, result{Name: strings.TrimPrefix(fields[2], "Benchmark"), Err: "FAIL"})
		case strings.HasPrefix(line, "Benchmark"):
			if ms, ok := parseFigures(fields[1:]); ok {
				out = append(out, result{Name: benchName(fields[0]), Metrics: ms})
				pending = ""
			} else {
				// The name, then the benchmark's own output.
				pending = fields[0]
			}
		case pending != "":
			if ms, ok := parseFigures(fields); ok {
				out = append(out, result{Name: benchName(pending), Metrics: ms})
				pending = ""
			}
		}
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read benchmark output: %w", err)
	}
	return mergeFailures(out), nil
}

// mergeFailures folds "--- FAIL" entries into the result of the same name,
// or keeps them as a row of their own when the benchmark printed none; a
// parent benchmark failing because a sub-benchmark did is dropped.
func mergeFailures(rs []result) []result {
	var out []result
	index := map[string]int{}
	for _, r := range rs {
		if i, ok := index[r.Name]; ok {
			if r.Err != "" {
				out[i].Err = r.Err
			}
			continue
		}
		index[r.Name] = len(out)
		out = append(out, r)
	}
	kept := out[:0]
	for _, r := range out {
		if r.Err != "" && len(r.Metrics) == 0 && hasChild(out, r.Name) {
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

func hasChild(rs []result, name string) bool {
	for _, r := range rs {
		if strings.HasPrefix(r.Name, name+"/") {
			return true
		}
	}
	return false
}

// goTestArgs is the `go test` command line of a Go benchmark entry.
func goTestArgs(e entry, quick bool) []string {
	bench, benchtime := e.Bench, e.Benchtime
	if quick && e.QuickBench != "" {
		bench = e.QuickBench
	}
	if quick && e.QuickBenchtime != "" {
		benchtime = e.QuickBenchtime
	}
	args := []string{"go", "test", "-run", "^$", "-bench", bench}
	if benchtime != "" {
		args = append(args, "-benchtime", benchtime)
	}
	return append(args, e.Pkg)
}

// loadArgs is the `go run ./bench` command line of a load tool entry.
func loadArgs(e entry, quick bool) []string {
	args := e.Args
	if quick && e.QuickArgs != nil {
		args = e.QuickArgs
	}
	return append([]string{"go", "run", "./bench"}, args...)
}

// entryEnv is the environment an entry adds to the command.
func entryEnv(e entry, quick bool) []string {
	if quick && e.QuickEnv != nil {
		return e.QuickEnv
	}
	return e.Env
}

// commandLine is what a reader pastes into a shell at the repository root
// to reproduce an entry: environment, then the arguments, quoted.
func commandLine(env, args []string) string {
	parts := make([]string, 0, len(env)+len(args))
	for _, kv := range env {
		parts = append(parts, shellQuote(kv))
	}
	for _, a := range args {
		parts = append(parts, shellQuote(a))
	}
	return strings.Join(parts, " ")
}

// shellSafe are arguments a POSIX shell takes as they are.
var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./=:,+-]+$`)

func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// runGoBench runs one Go benchmark entry in root, its output copied to
// progress as it comes, and returns its parsed results.
func runGoBench(ctx context.Context, root string, e entry, quick bool, progress io.Writer) ([]result, error) {
	args := goTestArgs(e, quick)
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), entryEnv(e, quick)...)
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(&buf, progress)
	cmd.Stderr = progress
	runErr := cmd.Run()
	rs, err := parseBenchOutput(&buf)
	if err != nil {
		return rs, err
	}
	if runErr != nil {
		return rs, fmt.Errorf("%s: %w", commandLine(nil, args), runErr)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("%s: no benchmark results in its output", commandLine(nil, args))
	}
	return rs, nil
}
