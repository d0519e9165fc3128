package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// apiClient is one keep-alive HTTP client for a base URL. The daemon and
// the hello-world handler are driven through the same code, so the
// difference between their figures is the daemon's own cost.
type apiClient struct {
	base string
	key  string
	http *http.Client
}

func newAPIClient(base, key string, conns int) *apiClient {
	idle := max(conns, 64)
	tr := &http.Transport{
		// No proxy, whatever the environment says: the bench talks to
		// 127.0.0.1 only.
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		MaxIdleConns:        2 * idle,
		MaxIdleConnsPerHost: 2 * idle,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
	}
	return &apiClient{base: base, key: key, http: &http.Client{Transport: tr, Timeout: 30 * time.Second}}
}

func (c *apiClient) close() { c.http.CloseIdleConnections() }

// do sends one request and reads the whole answer, so the connection goes
// back to the pool. It returns the time until the body was read.
func (c *apiClient) do(ctx context.Context, method, pathQuery string, body []byte) (status int, resp []byte, took time.Duration, err error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+pathQuery, rd)
	if err != nil {
		return 0, nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+c.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	start := time.Now()
	res, err := c.http.Do(req)
	if err != nil {
		return 0, nil, time.Since(start), err
	}
	resp, err = io.ReadAll(res.Body)
	res.Body.Close()
	return res.StatusCode, resp, time.Since(start), err
}

// accepted is one 201 answer: the outbox item ID and when it arrived.
type accepted struct {
	id string
	at time.Time
}

type loadResult struct {
	name     string
	clients  int
	window   time.Duration
	ok       int             // 201 answers completed inside the window
	failed   int             // anything else inside the window, transport errors included
	firstErr string          // the first failure of the whole run, warm-up included
	lats     []time.Duration // of the ok requests inside the window, sorted
	accepted []accepted      // every 201 of the run, in arrival order
	// CPU seconds the daemon and the bench process used inside the window,
	// and the bytes the daemon wrote to disk in it; -1 where /proc is not
	// available.
	daemonCPU, benchCPU float64
	written             int64
	// All processors' busy and stolen CPU seconds inside the window.
	machineBusy, machineSteal float64
}

func (r loadResult) rate() float64 { return float64(r.ok) / r.window.Seconds() }

// postLoad runs o.clients loops of POST /v1/messages for o.warmup plus
// o.duration and measures the o.duration part. d is the daemon whose CPU
// to account, or nil for the hello-world handler.
func postLoad(ctx context.Context, name string, c *apiClient, o options, d *daemon) (loadResult, error) {
	defer c.close()
	res := loadResult{name: name, clients: o.clients, window: o.duration, daemonCPU: -1, benchCPU: -1, written: -1, machineBusy: -1, machineSteal: -1}
	start := time.Now()
	winStart, winEnd := start.Add(o.warmup), start.Add(o.warmup+o.duration)
	// Requests still in flight at the end finish on their own; the hard
	// deadline only guards against a hung server.
	ctx, cancel := context.WithDeadline(ctx, winEnd.Add(45*time.Second))
	defer cancel()
	slog.Info("POST load", "target", name, "clients", o.clients, "warmup", o.warmup, "duration", o.duration)

	type worker struct {
		ok, failed int
		lats       []time.Duration
		accepted   []accepted
	}
	workers := make([]worker, o.clients)
	var (
		seq      atomic.Int64
		errOnce  sync.Once
		firstErr string
		wg       sync.WaitGroup
	)
	var cpuStart [2]float64
	cpuTaken := make(chan struct{})
	go func() {
		// Sample CPU at the window's edges from a separate goroutine, so no
		// client pays for it.
		defer close(cpuTaken)
		select {
		case <-time.After(time.Until(winStart)):
		case <-ctx.Done():
			return
		}
		cpuStart = [2]float64{procCPU(daemonPID(d)), procCPU(0)}
		wroteStart := procWriteBytes(daemonPID(d))
		busyStart, stealStart := machineCPU()
		select {
		case <-time.After(time.Until(winEnd)):
		case <-ctx.Done():
			return
		}
		if cpuStart[0] >= 0 {
			res.daemonCPU = procCPU(daemonPID(d)) - cpuStart[0]
		}
		if cpuStart[1] >= 0 {
			res.benchCPU = procCPU(0) - cpuStart[1]
		}
		if busyStart >= 0 {
			busy, steal := machineCPU()
			res.machineBusy, res.machineSteal = busy-busyStart, steal-stealStart
		}
		if wroteStart >= 0 {
			res.written = procWriteBytes(daemonPID(d)) - wroteStart
		}
	}()
	for w := range workers {
		wg.Go(func() {
			me := &workers[w]
			me.lats = make([]time.Duration, 0, 4096)
			for time.Now().Before(winEnd) && ctx.Err() == nil {
				n := seq.Add(1)
				body := []byte(`{"from":"` + lineHandle + `","to":"` + contactSmall + `","text":"bench ` + strconv.FormatInt(n, 10) + `"}`)
				status, resp, took, err := c.do(ctx, http.MethodPost, "/v1/messages", body)
				end := time.Now()
				inWindow := !end.Before(winStart) && !end.After(winEnd)
				if err == nil && status == http.StatusCreated {
					var item struct {
						ID string `json:"id"`
					}
					if json.Unmarshal(resp, &item) == nil {
						me.accepted = append(me.accepted, accepted{id: item.ID, at: end})
					}
					if inWindow {
						me.ok++
						me.lats = append(me.lats, took)
					}
					continue
				}
				if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
					return
				}
				if inWindow {
					me.failed++
				}
				errOnce.Do(func() {
					if err != nil {
						firstErr = err.Error()
					} else {
						firstErr = fmt.Sprintf("HTTP %d: %s", status, bytes.TrimSpace(resp))
					}
				})
			}
		})
	}
	wg.Wait()
	<-cpuTaken
	if err := ctx.Err(); err != nil {
		return res, fmt.Errorf("POST load on %s: %w", name, err)
	}
	for _, w := range workers {
		res.ok += w.ok
		res.failed += w.failed
		res.lats = append(res.lats, w.lats...)
		res.accepted = append(res.accepted, w.accepted...)
	}
	res.firstErr = firstErr
	slices.Sort(res.lats)
	slices.SortFunc(res.accepted, func(a, b accepted) int { return a.at.Compare(b.at) })
	slog.Info("POST load done", "target", name, "ok", res.ok, "failed", res.failed,
		"req_per_s", int(res.rate()), "p50", pct(res.lats, 0.50), "p99", pct(res.lats, 0.99))
	return res, nil
}

// daemonPID is the process whose CPU counts as the server's: -1 (none) for
// the hello-world handler, which shares the bench's own process.
func daemonPID(d *daemon) int {
	if d == nil {
		return -1
	}
	return d.pid()
}

// hello is the baseline: a net/http server in this process that answers
// every request with a small JSON body and 201, as the daemon does.
type hello struct {
	srv *http.Server
	url string
}

func startHello() (*hello, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("hello-world listener: %w", err)
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Read the body as the daemon does, or the comparison would
		// flatter the baseline.
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.WriteHeader(http.StatusCreated)
		w.Write([]byte(`{"id":"obx_hello","status":"pending"}` + "\n"))
	})
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	return &hello{srv: srv, url: "http://" + l.Addr().String()}, nil
}

func (h *hello) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.srv.Shutdown(ctx)
}

// pct returns the q-quantile of sorted durations (nearest rank).
func pct(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
