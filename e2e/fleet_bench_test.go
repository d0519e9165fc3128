package e2e

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/blueline-app/blueline/apitest"
	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// BenchmarkFleet measures a fleet of three nodes in one process on
// loopback, each with its embedded NATS server and its own line:
//
//	local-p50-ms, local-p99-ms  GET /v1/messages of C's line, asked of C
//	fwd-p50-ms, fwd-p99-ms      the same, asked of A and forwarded to C
//	events/s                    events recorded on A's line until a webhook (registered through B) has them all, through the stream
//	key-p50-ms, key-max-ms      a key made on A until B and C accept it
//	revoke-p50-ms               a key revoked on C until A refuses it
//
// -benchtime Nx: N requests of each kind, 10 N events, N/20 key changes
// (at least 5).
func BenchmarkFleet(b *testing.B) {
	nodes := daemontest.Fleet(b, 3, "[webhooks]\nallow_http = true\nallow_private_networks = true\n[limits]\nrequests_per_hour = 10000000\n")
	a, via, c := nodes[0], nodes[1], nodes[2]
	key := daemontest.FleetKey(b, nodes, api.KeyRequest{})
	get := func(base, path, key string) int {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	c.Inbound(daemontest.FleetLine(2), alice, "hello")
	hooksOfA := "/v1/webhooks?" + url.Values{"from": {daemontest.FleetLine(0)}}.Encode()
	history := "/v1/messages?" + url.Values{"from": {daemontest.FleetLine(2)}, "to": {alice}}.Encode()
	timed := func(base string) []time.Duration {
		out := make([]time.Duration, 0, b.N)
		for range b.N {
			start := time.Now()
			if s := get(base, history, key); s != 200 {
				b.Fatalf("GET %s%s: %d", base, history, s)
			}
			out = append(out, time.Since(start))
		}
		return out
	}
	timed(a.URL()) // warm: connections, the directory's cache
	b.ResetTimer()
	local, fwd := timed(c.URL()), timed(a.URL())
	b.StopTimer()
	b.ReportMetric(ms(pctile(local, .5)), "local-p50-ms")
	b.ReportMetric(ms(pctile(local, .99)), "local-p99-ms")
	b.ReportMetric(ms(pctile(fwd, .5)), "fwd-p50-ms")
	b.ReportMetric(ms(pctile(fwd, .99)), "fwd-p99-ms")

	// Events: recorded on A, through the stream, to a webhook of A's line
	// registered through B, delivered by whichever node pulls.
	events := 10 * b.N
	delivered := make(chan struct{}, events)
	rc := apitest.NewReceiver(b, false, func(int, http.ResponseWriter, *http.Request) int {
		delivered <- struct{}{}
		return http.StatusNoContent
	})
	r := apitest.Client{TB: b, Base: via.URL()}.Call("POST", "/v1/webhooks", key,
		map[string]any{"from": daemontest.FleetLine(0), "url": rc.Server.URL, "events": []string{api.EventMessageReceived}})
	if r.Status != 201 {
		b.Fatalf("webhook: %d %s", r.Status, r.Raw)
	}
	for _, td := range nodes { // every node consumes before the clock starts
		testkit.Eventually(b, 30*time.Second, func() bool {
			return get(td.URL(), hooksOfA, key) == 200
		})
	}
	a.Inbound(daemontest.FleetLine(0), bob, "warm")
	<-delivered
	start := time.Now()
	for i := range events {
		text := fmt.Sprintf("event %d", i)
		in := bridge.Inbound{Line: daemontest.FleetLine(0), Service: "imessage", Chat: sim.OneToOne("imessage", alice),
			GUID: sim.NewGUID(), Sender: alice, Text: &text, SentAt: time.Now()}
		if _, err := a.Daemon().Record(context.Background(), in); err != nil {
			b.Fatal(err)
		}
	}
	for range events {
		select {
		case <-delivered:
		case <-time.After(time.Minute):
			b.Fatalf("the webhook stopped receiving after %v", time.Since(start))
		}
	}
	b.ReportMetric(float64(events)/time.Since(start).Seconds(), "events/s")

	// Key changes: made on A, accepted by B and C; revoked on C, refused
	// by A.
	changes := max(5, b.N/20)
	var made, revoked []time.Duration
	for range changes {
		start := time.Now()
		var made1 api.KeyInfo
		if err := a.Admin().Do(context.Background(), http.MethodPost, "/keys", api.KeyRequest{Label: "bench", Scopes: "all"}, &made1); err != nil {
			b.Fatal(err)
		}
		k := made1.Secret
		for _, td := range []*daemontest.Daemon{via, c} {
			testkit.Eventually(b, 10*time.Second, func() bool { return get(td.URL(), hooksOfA, k) != 401 })
		}
		made = append(made, time.Since(start))
		start = time.Now()
		if err := c.Admin().Do(context.Background(), http.MethodPost, "/keys/revoke", map[string]string{"id": made1.ID}, nil); err != nil {
			b.Fatal(err)
		}
		testkit.Eventually(b, 10*time.Second, func() bool { return get(a.URL(), hooksOfA, k) == 401 })
		revoked = append(revoked, time.Since(start))
	}
	b.ReportMetric(ms(pctile(made, .5)), "key-p50-ms")
	b.ReportMetric(ms(pctile(made, 1)), "key-max-ms")
	b.ReportMetric(ms(pctile(revoked, .5)), "revoke-p50-ms")
}

// BenchmarkFleetNodeMemory is the memory of a fleet's node process (its
// embedded NATS server with the stream, the buckets and a webhook's
// consumer) against a single host's, both idle after the same few
// messages: node-rss-MiB and node-anon-MiB (the mean of three nodes),
// single-rss-MiB and single-anon-MiB. -benchtime 1x.
func BenchmarkFleetNodeMemory(b *testing.B) {
	procs := startFleetProcs(b, 3, "[webhooks]\nallow_http = true\nallow_private_networks = true\n")
	rc := apitest.NewReceiver(b, false, nil)
	key := procs[0].key()
	waitKey(b, key, procs[1:]...)
	if r := procs[1].call("POST", "/v1/webhooks", key, map[string]any{"from": procs[0].line, "url": rc.Server.URL, "events": []string{api.EventMessageReceived}}); r.Status != 201 {
		b.Fatalf("webhook: %d %s", r.Status, r.Raw)
	}
	single, write := processTestDaemon(b)
	write("")
	bin := procs[0].bin
	cmd := serveBinary(single, bin)
	for i := range 20 {
		procs[i%3].inbound(procs[i%3].line, alice, fmt.Sprintf("hi %d", i))
		single.inbound(mainLine, alice, fmt.Sprintf("hi %d", i))
	}
	testkit.Eventually(b, 30*time.Second, func() bool { return len(rc.Requests()) >= 7 })
	b.ResetTimer()
	for range b.N {
		var rss, anon float64
		for _, p := range procs {
			r, _, a, _ := procStatusOf(p.cmd.Process.Pid)
			rss, anon = rss+mib(r)/3, anon+mib(a)/3
		}
		b.ReportMetric(rss, "node-rss-MiB")
		b.ReportMetric(anon, "node-anon-MiB")
		r, _, a, _ := procStatusOf(cmd.Process.Pid)
		b.ReportMetric(mib(r), "single-rss-MiB")
		b.ReportMetric(mib(a), "single-anon-MiB")
	}
}

// ms is d in milliseconds.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
