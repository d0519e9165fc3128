package main

import (
	"errors"
	"io"
	"reflect"
	"strings"
	"testing"
)

// typedstreamOutput is a real run: go test -run '^$' -bench
// '^Benchmark(Text|Encode)$' -benchtime 1x ./bridge/messages/typedstream
const typedstreamOutput = `goos: linux
goarch: amd64
pkg: github.com/blueline-app/blueline/bridge/messages/typedstream
cpu: AMD EPYC
BenchmarkText/message-2         	       1	     45318 ns/op	   5.91 MB/s	    1456 B/op	       3 allocs/op
BenchmarkText/4KiB-2            	       1	     17477 ns/op	 247.81 MB/s	    6272 B/op	       3 allocs/op
BenchmarkText/edited-2          	       1	     15924 ns/op	  16.58 MB/s	    1456 B/op	       3 allocs/op
BenchmarkEncode-2               	       1	     23505 ns/op	    2232 B/op	      11 allocs/op
PASS
ok  	github.com/blueline-app/blueline/bridge/messages/typedstream	0.005s
`

func TestParseBenchOutputMicro(t *testing.T) {
	got, err := parseBenchOutput(strings.NewReader(typedstreamOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := []result{
		{Name: "Text/message", Metrics: []metric{{45318, "ns/op"}, {5.91, "MB/s"}, {1456, "B/op"}, {3, "allocs/op"}}},
		{Name: "Text/4KiB", Metrics: []metric{{17477, "ns/op"}, {247.81, "MB/s"}, {6272, "B/op"}, {3, "allocs/op"}}},
		{Name: "Text/edited", Metrics: []metric{{15924, "ns/op"}, {16.58, "MB/s"}, {1456, "B/op"}, {3, "allocs/op"}}},
		{Name: "Encode", Metrics: []metric{{23505, "ns/op"}, {2232, "B/op"}, {11, "allocs/op"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

// stubOutput is a real run of a throwaway package made to show the shapes
// the e2e benchmarks produce (go test -run '^$' -bench . -benchtime 1x): a
// custom metric, the b.Logf lines after "--- BENCH:", a sub-benchmark that
// fails and its parent with it, stdout noise before a name.
const stubOutput = `goos: linux
goarch: amd64
pkg: x
cpu: AMD EPYC
BenchmarkA/ok-2         	       1	     33731 ns/op	         3.500 x-ms
--- BENCH: BenchmarkA/ok-2
    x_test.go:4: hi
stdout noise
--- FAIL: BenchmarkA/bad
    x_test.go:5: boom
--- FAIL: BenchmarkA
noise
BenchmarkB-2            	       1	     29985 ns/op	         2.000 y
FAIL
exit status 1
FAIL	x	0.012s
FAIL
`

func TestParseBenchOutputStub(t *testing.T) {
	got, err := parseBenchOutput(strings.NewReader(stubOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := []result{
		{Name: "A/ok", Metrics: []metric{{33731, "ns/op"}, {3.5, "x-ms"}}},
		{Name: "A/bad", Err: "FAIL"},
		{Name: "B", Metrics: []metric{{29985, "ns/op"}, {2, "y"}}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

// stubNoiseOutput is the same package run with -bench '^BenchmarkB$'
// -benchtime 100x: the benchmark's stdout lands between its name and its
// figures.
const stubNoiseOutput = `noise
goos: linux
goarch: amd64
pkg: x
cpu: AMD EPYC
BenchmarkB-2   	noise
     100	       424.6 ns/op	         2.000 y
PASS
ok  	x	0.006s
`

func TestParseBenchOutputNoise(t *testing.T) {
	got, err := parseBenchOutput(strings.NewReader(stubNoiseOutput))
	if err != nil {
		t.Fatal(err)
	}
	want := []result{{Name: "B", Metrics: []metric{{424.6, "ns/op"}, {2, "y"}}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
}

func TestParseFigures(t *testing.T) {
	for _, tc := range []struct {
		line string
		ok   bool
	}{
		{"1 45318 ns/op", true},
		{"1 45318", false},             // a value without its unit
		{"x 45318 ns/op", false},       // no iteration count
		{"1 fast ns/op", false},        // not a number
		{"PASS", false},                // a status line
		{"ok pkg 0.005s", false},       // the package summary
		{"20000 1 a 2 b 3 c", true},    // custom metrics
		{"messages_x.go:73: 1", false}, // a log line
	} {
		if _, ok := parseFigures(strings.Fields(tc.line)); ok != tc.ok {
			t.Errorf("parseFigures(%q) ok = %v, want %v", tc.line, ok, tc.ok)
		}
	}
}

func TestFigures(t *testing.T) {
	ms := []metric{{0, "ns/op"}, {0.631, "settle-s"}, {15848, "rows/s"}, {0, "flood-events"}}
	if got, want := figures(ms, []string{"settle-s", "rows/s", "flood-events", "rss-peak-MiB"}), "0.631 settle-s, 15,848 rows/s, 0 flood-events"; got != want {
		t.Errorf("wanted metrics: %q, want %q", got, want)
	}
	// None of the wanted units: all of them, but the hidden ns/op.
	if got, want := figures(ms, []string{"renamed"}), "0.631 settle-s, 15,848 rows/s, 0 flood-events"; got != want {
		t.Errorf("fallback: %q, want %q", got, want)
	}
	if got := figures(nil, micro); got != "—" {
		t.Errorf("no metrics: %q, want —", got)
	}
}

func TestFormatValue(t *testing.T) {
	for v, want := range map[float64]string{
		0: "0", 3: "3", 0.631: "0.631", 5.91: "5.91", 247.81: "248", 999.4: "999", 999.6: "1,000",
		45318: "45,318", 57000.4: "57,000", -2.5: "-2.5", 0.00012345: "0.000123",
	} {
		if got := formatValue(v); got != want {
			t.Errorf("formatValue(%v) = %q, want %q", v, got, want)
		}
	}
}

func TestCommandLine(t *testing.T) {
	e := entry{Pkg: "./e2e", Bench: "^BenchmarkWebhook(Throughput|Isolation)$", Benchtime: "20000x", QuickBenchtime: "500x",
		QuickEnv: []string{"BLUELINE_BENCH_IDLE=2s"}}
	if got, want := commandLine(entryEnv(e, false), goTestArgs(e, false)),
		`go test -run '^$' -bench '^BenchmarkWebhook(Throughput|Isolation)$' -benchtime 20000x ./e2e`; got != want {
		t.Errorf("full: %s\nwant  %s", got, want)
	}
	if got, want := commandLine(entryEnv(e, true), goTestArgs(e, true)),
		`BLUELINE_BENCH_IDLE=2s go test -run '^$' -bench '^BenchmarkWebhook(Throughput|Isolation)$' -benchtime 500x ./e2e`; got != want {
		t.Errorf("quick: %s\nwant   %s", got, want)
	}
	load := entry{Args: []string{"-files", "1GiB"}, QuickArgs: []string{"-files", "32MiB"}}
	if got := commandLine(nil, loadArgs(load, true)); got != "go run ./bench -files 32MiB" {
		t.Errorf("load, quick: %s", got)
	}
	if got := commandLine(nil, loadArgs(entry{}, false)); got != "go run ./bench" {
		t.Errorf("load, default: %s", got)
	}
	if got := shellQuote("it's"); got != `'it'\''s'` {
		t.Errorf("shellQuote: %s", got)
	}
}

func TestPrintTable(t *testing.T) {
	e := entry{Name: "webhooks", Measures: "events/s | isolation", Metrics: []string{"events/s"}}
	cmd := `go test -run '^$' -bench '^BenchmarkWebhook(Throughput|Isolation)$' -benchtime 20000x ./e2e`
	rows := rowsFor(e, cmd, []result{
		{Name: "WebhookThroughput", Metrics: []metric{{81234, "ns/op"}, {12310, "events/s"}}},
		{Name: "WebhookIsolation", Err: "FAIL"},
	}, errors.New("exit status 1"))
	rows = append(rows, rowsFor(entry{Name: "files-load", Measures: "m"}, "go run ./bench -files 1GiB", nil, errors.New("no space\nleft"))...)
	var b strings.Builder
	printTable(&b, rows)
	want := "| benchmark | what it measures | figures | command |\n" +
		"|---|---|---|---|\n" +
		"| webhooks WebhookThroughput | events/s \\| isolation | 12,310 events/s | `go test -run '^$' -bench '^BenchmarkWebhook(Throughput\\|Isolation)$' -benchtime 20000x ./e2e` |\n" +
		"| webhooks WebhookIsolation |  | FAILED: FAIL | `go test -run '^$' -bench '^BenchmarkWebhook(Throughput\\|Isolation)$' -benchtime 20000x ./e2e` |\n" +
		"| files-load | m | FAILED: no space left | `go run ./bench -files 1GiB` |\n"
	if got := b.String(); got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

func TestSelectEntries(t *testing.T) {
	got, err := selectEntries(registry, "^webhooks$|^typedstream$")
	if err != nil || len(got) != 2 {
		t.Fatalf("selectEntries: %d entries, %v", len(got), err)
	}
	if _, err := selectEntries(registry, "nothing-by-this-name"); err == nil {
		t.Error("a regexp matching no entry: no error")
	}
	if _, err := selectEntries(registry, "("); err == nil {
		t.Error("a bad regexp: no error")
	}
}

// The whole path on the cheapest benchmark there is: the subprocess, its
// output parsed, the entry's metrics picked.
func TestRunGoBenchTypedstream(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go test on another package")
	}
	e, err := selectEntries(registry, "^typedstream$")
	if err != nil {
		t.Fatal(err)
	}
	rs, err := runGoBench(t.Context(), "..", e[0], true, io.Discard) // the module root

	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range rs {
		names = append(names, r.Name)
		if !strings.Contains(figures(r.Metrics, e[0].Metrics), " ns/op") {
			t.Errorf("%s: no ns/op in %+v", r.Name, r.Metrics)
		}
	}
	if want := []string{"Text/message", "Text/4KiB", "Text/edited", "Encode"}; !reflect.DeepEqual(names, want) {
		t.Errorf("results %v, want %v", names, want)
	}
}
