package main

import (
	"slices"
	"time"
)

// The load tool's figures as results, in the units the Go benchmarks use,
// so that both fill the same table.

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// messageResults picks the headline figures of a message run: each POST
// load, each chat's GET pages, and the outbox drain. Loads and chats the run
// did not reach are left out.
func messageResults(r *report) []result {
	var out []result
	for _, l := range r.loads {
		out = append(out, result{Name: "POST " + l.name, Metrics: []metric{
			{l.rate(), "req/s"}, {msOf(pct(l.lats, 0.5)), "ms/p50"}, {msOf(pct(l.lats, 0.99)), "ms/p99"}, {float64(l.failed), "non-201"},
		}})
	}
	for _, p := range r.pages {
		all := append(append([]time.Duration(nil), p.first...), p.walk...)
		slices.Sort(all)
		res := result{Name: "GET " + p.name, Metrics: []metric{{msOf(pct(all, 0.5)), "ms/p50"}, {msOf(pct(all, 0.99)), "ms/p99"}}}
		if p.failed > 0 || len(p.anomalies) > 0 {
			res.Err = "failed requests or a wrong listing; see the detailed report"
		}
		out = append(out, res)
	}
	if d := r.drain; d.items > 0 && d.err == "" {
		res := result{Name: "outbox drain", Metrics: []metric{
			{float64(d.delivered) / (d.took + r.opts.duration + r.opts.warmup).Seconds(), "items/s"},
		}}
		if !d.done {
			res.Err = "not drained within -drain"
		}
		out = append(out, res)
	}
	return out
}

// filesResults picks the headline figures of a files run: cp + fsync, the
// upload and the download, each with its time and rate; the transfers also
// against cp + fsync and with the daemon's memory growth.
func filesResults(r *filesReport) []result {
	var out []result
	if r.cpSync > 0 {
		out = append(out, result{Name: "cp + fsync", Metrics: []metric{
			{r.cpSync.Seconds(), "s"}, {mib(r.size) / r.cpSync.Seconds(), "MiB/s"},
		}})
	}
	for _, t := range []struct {
		name string
		t    transfer
	}{{"upload", r.up}, {"download", r.down}} {
		if t.t.took <= 0 {
			continue
		}
		ms := []metric{{t.t.took.Seconds(), "s"}, {t.t.rate(r.size), "MiB/s"}}
		if r.cpSync > 0 {
			ms = append(ms, metric{t.t.took.Seconds() / r.cpSync.Seconds(), "x-cp+fsync"})
		}
		// Growth can be negative (pages given back): mib would call that unknown.
		if t.t.base.total >= 0 && t.t.peak.total >= 0 {
			g := t.t.growth()
			ms = append(ms, metric{float64(g.total) / (1 << 20), "rss-MiB"})
			if t.t.base.anon >= 0 && t.t.peak.anon >= 0 {
				ms = append(ms, metric{float64(g.anon) / (1 << 20), "anon-MiB"})
			}
		}
		out = append(out, result{Name: t.name, Metrics: ms})
	}
	return out
}
