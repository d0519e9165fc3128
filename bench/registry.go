package main

// The one list of Blueline's benchmarks. `go run ./bench all` runs every
// entry and prints one table; registry_test.go fails when a
// `func Benchmark…` in the module is missing here, or an entry names one
// that no longer exists, so the list cannot drift from the code.
//
// The Go benchmarks stay beside what they measure (package micro-benchmarks
// use unexported code, the e2e ones the e2e harness); this table is their
// single home for how to run them and what they mean. See bench/README.md,
// "Where benchmarks live and why".

// entry is one benchmark run: a `go test -bench` invocation, or one mode of
// this load tool (Pkg empty).
type entry struct {
	Name     string // short name, what -only matches
	Measures string // one line for the table's "what it measures" column

	// Go benchmarks: the package (as a ./path from the module root), the
	// -bench regexp, and the functions it runs (checked by registry_test.go).
	Pkg   string
	Bench string
	Funcs []string

	// Load tool: its flags (nil is the default run).
	Args []string

	// The full run and the -quick one: benchtime (Go benchmarks), extra
	// environment (NAME=value) and, for the load tool, flags. Quick* left
	// empty keeps the full setting.
	Benchtime      string
	Env            []string
	QuickBenchtime string
	QuickEnv       []string
	QuickArgs      []string
	QuickBench     string // a narrower -bench under -quick, "" for Bench

	// Metrics are the units that go into the table, in this order; a result
	// reporting none of them shows all it reported.
	Metrics []string
}

// micro are the metrics of a package micro-benchmark.
var micro = []string{"ns/op", "MB/s", "B/op", "allocs/op"}

// registry lists every benchmark of the project, cheapest first, so that a
// run shows early results soon.
var registry = []entry{
	{
		Name:     "typedstream",
		Measures: "decoding a chat.db attributedBody to text (message, 4 KiB, edited) and encoding one",
		Pkg:      "./bridge/messages/typedstream", Bench: "^Benchmark(Text|Encode)$", Funcs: []string{"BenchmarkText", "BenchmarkEncode"},
		Benchtime: "1s", QuickBenchtime: "100x",
		Metrics: micro,
	},
	{
		Name:     "latency-record",
		Measures: "recording one stage of a line's latency (histogram and the last day's counts), alone and from 2 goroutines",
		Pkg:      "./metrics", Bench: "^BenchmarkLatency$", Funcs: []string{"BenchmarkLatency"},
		Benchtime: "1s", QuickBenchtime: "1000x",
		Metrics: micro,
	},
	{
		Name:     "history-pages",
		Measures: "GET /v1/messages' storage: a page of 50, newest and oldest, in a chat of 1,000,000 messages imported as history",
		Pkg:      "./storage", Bench: "^BenchmarkListHistory$", Funcs: []string{"BenchmarkListHistory"},
		Benchtime: "1s", QuickBenchtime: "100x",
		QuickEnv: []string{"BLUELINE_BENCH_ROWS=20000"},
		Metrics:  []string{"ms/page", "file-bytes/msg"},
	},
	{
		Name:     "search",
		Measures: "full-text search (SQLite FTS5) of a line's 100,000 messages: a rare word, two common words, a prefix; a page of 20 (the build's time and size are logged)",
		Pkg:      "./search", Bench: "^BenchmarkSearch$", Funcs: []string{"BenchmarkSearch"},
		Benchtime: "1s", QuickBenchtime: "20x",
		QuickEnv: []string{"BLUELINE_BENCH_ROWS=5000"},
		Metrics:  []string{"ns/op"},
	},
	{
		Name:     "chatdb-rows",
		Measures: "reading 100,000 chat.db rows (a first start's backlog) in one call",
		Pkg:      "./bridge/messages/chatdb", Bench: "^BenchmarkRows100k$", Funcs: []string{"BenchmarkRows100k"},
		Benchtime: "5x", QuickBenchtime: "1x",
		Metrics: []string{"rows/s", "ns/op", "B/op", "allocs/op"},
	},
	{
		Name:     "files-save",
		Measures: "files.Store.Save of a 64 MiB body (write, hash, fsync)",
		Pkg:      "./files", Bench: "^BenchmarkSave$", Funcs: []string{"BenchmarkSave"},
		Benchtime: "1s", QuickBenchtime: "1x",
		Metrics: micro,
	},
	{
		Name:      "messages-load",
		Measures:  "load tool: POST /v1/messages, 64 clients, durable, beside a hello-world handler; GET pages of 50 on 1,000- and 1,000,000-message chats; outbox drain",
		QuickArgs: []string{"-big", "20000", "-small", "1000", "-duration", "2s", "-warmup", "500ms", "-gets", "200", "-drain", "30s"},
		Metrics:   []string{"req/s", "ms/p50", "ms/p99", "non-201", "items/s"},
	},
	{
		Name:      "files-load",
		Measures:  "load tool: one file up and down through the daemon, against cp (+ fsync) on the same disk, with the daemon's memory growth",
		Args:      []string{"-files", "1GiB"},
		QuickArgs: []string{"-files", "32MiB"},
		Metrics:   []string{"s", "MiB/s", "x-cp+fsync", "rss-MiB", "anon-MiB"},
	},
	{
		Name:     "messages-latency",
		Measures: "a row inserted into chat.db until it is readable through the API and reaches a webhook, with the watcher and polling alone",
		Pkg:      "./e2e", Bench: "^BenchmarkMessagesLatency$", Funcs: []string{"BenchmarkMessagesLatency"},
		Benchtime: "30x", QuickBenchtime: "3x",
		Metrics: []string{"api-p50-ms", "webhook-p50-ms", "webhook-p95-ms"},
	},
	{
		Name:     "messages-watch",
		Measures: "a row written to chat.db until its webhook arrives, for new messages and for edits (200 samples)",
		Pkg:      "./e2e", Bench: "^BenchmarkMessagesWatchLatency$", Funcs: []string{"BenchmarkMessagesWatchLatency"},
		Benchtime: "1x",
		QuickEnv:  []string{"BLUELINE_BENCH_SAMPLES=8"},
		Metrics:   []string{"new-p50-ms", "new-p99-ms", "edit-p50-ms", "edit-p99-ms"},
	},
	{
		Name:     "messages-first-start",
		Measures: "first start importing a 1,000,000-row chat.db (time, rate, memory growth, the data folder's size per message), then a restart with 10 new rows",
		Pkg:      "./e2e", Bench: "^BenchmarkMessagesFirstStart$", Funcs: []string{"BenchmarkMessagesFirstStart"},
		Benchtime: "1x",
		QuickEnv:  []string{"BLUELINE_BENCH_ROWS=20000"},
		Metrics:   []string{"import-s", "import-cpu-s", "msgs/s", "heap-peak-MiB", "rss-peak-MiB", "rss-anon-peak-MiB", "bytes/msg", "data-MiB", "restart-10-new-ms"},
	},
	{
		Name:     "messages-idle",
		Measures: "CPU of an idle daemon watching the 1,000,000-row chat.db, over 60 s",
		Pkg:      "./e2e", Bench: "^BenchmarkMessagesIdleCPU$", Funcs: []string{"BenchmarkMessagesIdleCPU"},
		Benchtime: "1x",
		QuickEnv:  []string{"BLUELINE_BENCH_ROWS=20000", "BLUELINE_BENCH_IDLE=2s"},
		Metrics:   []string{"cpu-%", "read-syscalls-per-60s"},
	},
	{
		Name:     "messages-send",
		Measures: "sends through the stand-in osascript confirmed by their chat.db row: sends/min, and POST to sent when the row comes 200 ms later",
		Pkg:      "./e2e", Bench: "^BenchmarkMessagesSend$", Funcs: []string{"BenchmarkMessagesSend"},
		Benchtime: "100x", QuickBenchtime: "5x",
		Metrics: []string{"sends/min", "ms-median-post-to-sent"},
	},
	{
		Name:     "messages-flood",
		Measures: "an iCloud flood of 10,000 old rows on a 100,000-row history: time to settle, events raised (want 0), CPU, memory",
		Pkg:      "./e2e", Bench: "^BenchmarkMessagesICloudFlood$", Funcs: []string{"BenchmarkMessagesICloudFlood"},
		Benchtime: "1x",
		QuickEnv:  []string{"BLUELINE_BENCH_FLOOD_HISTORY=5000", "BLUELINE_BENCH_FLOOD=1000"},
		Metrics:   []string{"settle-s", "rows/s", "flood-events", "history-rows", "twins", "cpu-s", "heap-peak-MiB", "rss-peak-MiB"},
	},
	{
		Name:     "webhooks",
		Measures: "webhook events/s to one HTTPS receiver; with 20 webhooks whose 20th never answers, the rate the other 19 get every event",
		Pkg:      "./e2e", Bench: "^BenchmarkWebhook(Throughput|Isolation)$", Funcs: []string{"BenchmarkWebhookThroughput", "BenchmarkWebhookIsolation"},
		Benchtime: "20000x", QuickBenchtime: "500x",
		Metrics: []string{"events/s", "recorded/s", "deliveries/s", "dead-requests"},
	},
	{
		Name:     "slow-headers",
		Measures: "2,000 connections sending half a header: connections taken in, memory per connection, a fresh request's wait; at the default cap and above",
		Pkg:      "./e2e", Bench: "^BenchmarkSlowHeaders$", Funcs: []string{"BenchmarkSlowHeaders"},
		Benchtime: "1x",
		// At cap=1024 the fresh request waits out the slow heads' 10 s.
		QuickBench: "^BenchmarkSlowHeaders$/^cap=4096$",
		Metrics:    []string{"conns-taken", "heap+stack-KiB/conn", "rss-MiB", "fresh-request-s"},
	},
	{
		Name:     "fleet",
		Measures: "a fleet of three nodes on loopback: a forwarded read against a local one, events/s from a line to a webhook through the stream, a key change until every node has it",
		Pkg:      "./e2e", Bench: "^BenchmarkFleet$", Funcs: []string{"BenchmarkFleet"},
		Benchtime: "1000x", QuickBenchtime: "100x",
		Metrics: []string{"local-p50-ms", "local-p99-ms", "fwd-p50-ms", "fwd-p99-ms", "events/s", "key-p50-ms", "key-max-ms", "revoke-p50-ms"},
	},
	{
		Name:     "fleet-memory",
		Measures: "memory of a fleet node's process (embedded NATS, stream, buckets, a webhook consumer) against a single host's, idle",
		Pkg:      "./e2e", Bench: "^BenchmarkFleetNodeMemory$", Funcs: []string{"BenchmarkFleetNodeMemory"},
		Benchtime: "1x",
		Metrics:   []string{"node-rss-MiB", "node-anon-MiB", "single-rss-MiB", "single-anon-MiB"},
	},
}
