package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets the results are checked against.
const (
	targetPostRate  = 10_000               // accepted POST /v1/messages per second
	targetGetMedian = 2 * time.Millisecond // median GET page latency, every chat
)

// report gathers what the run measured; print writes it whatever stage the
// run reached, so a failure still shows the figures taken before it.
type report struct {
	opts          options
	workers       int // the daemon's delivery workers, as configured
	seed          seedStats
	dbAfterSeed   int64
	dbAfterLoad   int64
	rssAfterStart rss
	rssAfterLoad  rss
	pages         []pageStats
	loads         []loadResult
	drain         drainResult
	fsync         syncProbe
	shutdown      time.Duration
	shutdownErr   error
	daemonLog     string
}

func (r *report) print(out io.Writer) {
	o := r.opts
	fmt.Fprintf(out, "\n=== Blueline bench: %d CPUs, %s %s/%s ===\n", runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if r.seed.messages > 0 {
		fmt.Fprintf(out, "Seeded %s messages (%s + %s) in %s: %s msg/s with %d goroutines\n",
			thousands(r.seed.messages), thousands(o.small), thousands(o.big), r.seed.took.Round(time.Millisecond),
			thousands(int(float64(r.seed.messages)/r.seed.took.Seconds())), r.seed.seeders)
	}
	fmt.Fprintf(out, "DB file: %s after seeding, %s at the end\n", sizeStr(r.dbAfterSeed), sizeStr(r.dbAfterLoad))
	fmt.Fprintf(out, "Daemon RSS after start:         %s\n", r.rssAfterStart)
	fmt.Fprintf(out, "Daemon RSS after the POST load: %s\n", r.rssAfterLoad)

	if len(r.loads) > 0 {
		fmt.Fprintf(out, "\nPOST /v1/messages: %d clients, %s measured after %s warm-up (201s only); daemon delivery workers: %d\n",
			o.clients, o.duration, o.warmup, r.workers)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "server\treq/s\tp50\tp90\tp99\tmax\tnon-201\tserver CPU\tbench CPU\tdisk writes\t")
		for _, l := range r.loads {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t\n", l.name, thousands(int(l.rate())),
				ms(pct(l.lats, 0.5)), ms(pct(l.lats, 0.9)), ms(pct(l.lats, 0.99)), ms(pct(l.lats, 1)),
				l.failed, cores(l.daemonCPU, l.window), cores(l.benchCPU, l.window), writeRate(l))
		}
		tw.Flush()
		fmt.Fprintln(out, "(CPU: cores used over the window; the hello-world server runs inside the bench process.")
		fmt.Fprintln(out, " Disk writes: the daemon's write_bytes over the window, and per accepted request)")
		switch f := r.fsync; {
		case f.err != nil:
			fmt.Fprintf(out, "Disk: %v\n", f.err)
		case f.n > 0:
			fmt.Fprintf(out, "Disk, just before the daemon's load: 4 KiB write + fsync p50 %s, p99 %s, max %s (%d rounds)\n",
				ms(f.p50), ms(f.p99), ms(f.max), f.n)
		}
		for _, l := range r.loads {
			if l.machineBusy >= 0 {
				fmt.Fprintf(out, "Machine during the %s window: %s of %d cores busy, %s stolen by the hypervisor\n",
					l.name, cores(l.machineBusy, l.window), runtime.NumCPU(), cores(l.machineSteal, l.window))
			}
		}
		for _, l := range r.loads {
			if l.firstErr != "" {
				fmt.Fprintf(out, "first failure on %s: %.500s\n", l.name, l.firstErr)
			}
		}
	}
	if r.drain.items > 0 {
		d := r.drain
		switch {
		case d.err != "":
			fmt.Fprintf(out, "Outbox backlog: could not follow it: %s\n", d.err)
		case d.done:
			fmt.Fprintf(out, "Outbox backlog: all %s accepted items sent %s after the load ended (last item %s)\n",
				thousands(d.items), d.took.Round(time.Millisecond), d.lastStatus)
		default:
			fmt.Fprintf(out, "Outbox backlog: NOT drained %s after the load ended: about %s of %s items sent (last item %s)\n",
				d.took.Round(time.Millisecond), thousands(d.delivered), thousands(d.items), d.lastStatus)
		}
		if d.err == "" {
			// The worker sends during the load too, so the average runs
			// from the start of the load, warm-up included.
			fmt.Fprintf(out, "Delivery throughput: %s items/s on average from the start of the load until that check\n",
				thousands(int(float64(d.delivered)/(d.took+r.opts.duration+r.opts.warmup).Seconds())))
		}
	}

	if len(r.pages) > 0 {
		fmt.Fprintf(out, "\nGET /v1/messages limit=%d: %d sequential requests per chat, half first page, half walking next_cursor\n", pageSize, o.gets)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "chat\tpages\tn\tp50\tp90\tp99\tmax\tdepth (messages above)\t")
		for _, p := range r.pages {
			fmt.Fprintf(tw, "%s\tfirst page\t%d\t%s\t%s\t%s\t%s\t0\t\n", p.name, len(p.first),
				ms(pct(p.first, 0.5)), ms(pct(p.first, 0.9)), ms(pct(p.first, 0.99)), ms(pct(p.first, 1)))
			fmt.Fprintf(tw, "%s\twalk\t%d\t%s\t%s\t%s\t%s\t%s\t\n", p.name, len(p.walk),
				ms(pct(p.walk, 0.5)), ms(pct(p.walk, 0.9)), ms(pct(p.walk, 0.99)), ms(pct(p.walk, 1)),
				depthRange(p))
		}
		tw.Flush()
		for _, p := range r.pages {
			if p.walkedAll > 0 {
				fmt.Fprintf(out, "%s: a walk from the top listed %s messages, then restarted (%d restarts)\n",
					p.name, thousands(p.walkedAll), p.restarts)
			}
			if p.failed > 0 {
				fmt.Fprintf(out, "%s: %d failed requests; first: %.500s\n", p.name, p.failed, p.firstErr)
			}
			for _, a := range p.anomalies {
				fmt.Fprintf(out, "%s: WRONG LISTING: %s\n", p.name, a)
			}
		}
	}

	fmt.Fprintln(out, "\nTargets:")
	for _, l := range r.loads {
		if l.name == "blueline daemon" {
			fmt.Fprintf(out, "  POST >= %s req/s: %s (%s req/s)\n", thousands(targetPostRate), verdict(l.rate() >= targetPostRate), thousands(int(l.rate())))
		}
	}
	for _, p := range r.pages {
		all := append(append([]time.Duration(nil), p.first...), p.walk...)
		slices.Sort(all)
		fmt.Fprintf(out, "  GET median < %s on %s: %s (%s)\n", ms(targetGetMedian), p.name,
			verdict(len(all) > 0 && pct(all, 0.5) < targetGetMedian && p.failed == 0 && len(p.anomalies) == 0), ms(pct(all, 0.5)))
	}

	switch {
	case r.shutdownErr != nil:
		fmt.Fprintf(out, "\nShutdown: %v (after %s)\n", r.shutdownErr, r.shutdown.Round(time.Millisecond))
	case r.shutdown > 3*time.Second:
		fmt.Fprintf(out, "\nShutdown: SLOW: the daemon took %s to exit after SIGTERM\n", r.shutdown.Round(time.Millisecond))
	default:
		fmt.Fprintf(out, "\nShutdown: the daemon exited %s after SIGTERM\n", r.shutdown.Round(time.Millisecond))
	}
	if r.daemonLog != "" {
		fmt.Fprintf(out, "Daemon log (level warn, last lines):\n%s\n", indent(r.daemonLog))
	}
}

func depthRange(p pageStats) string {
	if p.minDepth < 0 {
		return "-"
	}
	return thousands(p.minDepth) + "-" + thousands(p.maxDepth)
}

func writeRate(l loadResult) string {
	if l.written < 0 {
		return "-"
	}
	per := "-"
	if l.ok > 0 {
		per = fmt.Sprintf("%.1f KiB/req", float64(l.written)/1024/float64(l.ok))
	}
	return fmt.Sprintf("%.1f MiB/s, %s", mib(l.written)/l.window.Seconds(), per)
}

func verdict(ok bool) string {
	if ok {
		return "PASS"
	}
	return "FAIL"
}

func ms(d time.Duration) string {
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func cores(cpu float64, window time.Duration) string {
	if cpu < 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", cpu/window.Seconds())
}

func sizeStr(b int64) string {
	if b < 0 {
		return "unknown"
	}
	return fmt.Sprintf("%.1f MiB", mib(b))
}

// thousands writes n with comma separators: rates and counts this large are
// hard to read otherwise.
func thousands(n int) string {
	s := fmt.Sprint(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
