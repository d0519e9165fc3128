package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/blueline-app/blueline/testkit"
)

const testSecret = "test-secret-0123456789abcdef"

// testCluster is n embedded nodes on loopback, clustered.
type testCluster struct {
	nodes []*Node
	opts  []Options
	logs  []*testkit.LogBuffer
}

// node is the i-th node (0 is "a").
func (c *testCluster) node(i int) *Node { return c.nodes[i] }

// logsText is every node's log, for a failed test.
func (c *testCluster) logsText() string {
	var b strings.Builder
	for i, l := range c.logs {
		fmt.Fprintf(&b, "--- node %s ---\n%s", c.opts[i].Node, l.String())
	}
	return b.String()
}

func (c *testCluster) close() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		if n != nil {
			wg.Go(func() { n.Close() })
		}
	}
	wg.Wait()
}

// freePorts reserves n loopback ports by listening and closing: a port can
// be taken before the server binds it, which startCluster survives by
// trying again once.
func freePorts(n int) ([]int, error) {
	ports := make([]int, n)
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ports[i] = l.Addr().(*net.TCPAddr).Port
		defer l.Close()
	}
	return ports, nil
}

// startTestCluster starts n nodes ("a", "b", …) with their own stores
// under dir, each with routes to all, and waits for them all to be ready.
func startTestCluster(dir string, n int, tweak func(i int, o *Options)) (*testCluster, error) {
	var lastErr error
	for try := 0; try < 2; try++ {
		ports, err := freePorts(n)
		if err != nil {
			return nil, err
		}
		var routes []string
		for _, p := range ports {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
		}
		c := &testCluster{nodes: make([]*Node, n)}
		for i := range n {
			buf := &testkit.LogBuffer{}
			name := string(rune('a' + i))
			o := Options{
				Node: name, Secret: testSecret, Prefix: "bl",
				Listen: "127.0.0.1:0", Cluster: fmt.Sprintf("127.0.0.1:%d", ports[i]), Routes: routes,
				StoreDir: fmt.Sprintf("%s/try%d/%s", dir, try, name), StartTimeout: 20 * time.Second, EventsMaxBytes: 64 << 20,
				Logger: slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})),
			}
			if tweak != nil {
				tweak(i, &o)
			}
			c.opts, c.logs = append(c.opts, o), append(c.logs, buf)
		}
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() { c.nodes[i], errs[i] = Start(context.Background(), c.opts[i]) })
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			c.close()
			lastErr = fmt.Errorf("%w\n%s", err, c.logsText())
			continue
		}
		return c, nil
	}
	return nil, lastErr
}

// shared is the three-node cluster the tests that stop no node share.
var shared struct {
	once sync.Once
	c    *testCluster
	err  error
	dir  string
}

func sharedCluster(t *testing.T) *testCluster {
	t.Helper()
	shared.once.Do(func() {
		start := time.Now()
		shared.dir, shared.err = os.MkdirTemp("", "fleet-test-")
		if shared.err == nil {
			shared.c, shared.err = startTestCluster(shared.dir, 3, nil)
		}
		fmt.Fprintf(os.Stderr, "fleet tests: shared 3-node cluster ready in %s\n", time.Since(start).Round(time.Millisecond))
	})
	if shared.err != nil {
		t.Fatalf("starting the shared cluster: %v", shared.err)
	}
	dumpOnFailure(t, shared.c)
	return shared.c
}

func dumpOnFailure(t *testing.T, c *testCluster) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.logsText())
		}
	})
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.c != nil {
		shared.c.close()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	os.Exit(code)
}

// waitInterest waits until from's server knows that node serves
// forwarded requests: the subscription travels over the routes.
func waitInterest(t *testing.T, from *Node, node string) {
	t.Helper()
	testkit.Eventually(t, settle, func() bool {
		return from.Server().GlobalAccount().SubscriptionInterest(from.forwardSubject(node))
	})
}

func ctxFor(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

type apiKey struct {
	Owner   string `json:"owner"`
	Revoked bool   `json:"revoked"`
}

// A key written on A reaches watchers on B and C within a second.
func TestKVWriteSeenByWatchers(t *testing.T) {
	c := sharedCluster(t)
	ctx := ctxFor(t, 10*time.Second)
	type seen struct {
		mu sync.Mutex
		m  map[string]Entry[apiKey]
	}
	var watchers []*seen
	for _, i := range []int{1, 2} {
		b, err := Open[apiKey](c.node(i), BucketKeys)
		if err != nil {
			t.Fatal(err)
		}
		s := &seen{m: map[string]Entry[apiKey]{}}
		w, err := b.Watch(context.Background(), func(e Entry[apiKey]) {
			s.mu.Lock()
			s.m[e.Key] = e
			s.mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
		watchers = append(watchers, s)
	}
	a, _ := Open[apiKey](c.node(0), BucketKeys)
	start := time.Now()
	rev, err := a.Put(ctx, "key_watch1", apiKey{Owner: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range watchers {
		testkit.Eventually(t, settle, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			e, ok := s.m["key_watch1"]
			return ok && e.Revision == rev && e.Value.Owner == "ops"
		})
		t.Logf("node %s saw the write after %s", c.opts[i+1].Node, time.Since(start).Round(time.Microsecond))
	}
	// A revocation too, and a deletion.
	if _, err := a.Update(ctx, "key_watch1", apiKey{Owner: "ops", Revoked: true}, rev); err != nil {
		t.Fatal(err)
	}
	if err := a.Delete(ctx, "key_watch1", 0); err != nil {
		t.Fatal(err)
	}
	for _, s := range watchers {
		testkit.Eventually(t, settle, func() bool {
			s.mu.Lock()
			defer s.mu.Unlock()
			return s.m["key_watch1"].Deleted
		})
	}
	if _, err := a.Get(ctx, "key_watch1"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get after Delete: %v, want ErrNotFound", err)
	}
}

// Compare-and-set: a second Create, and an Update or Delete at a stale
// revision, are refused.
func TestKVCompareAndSet(t *testing.T) {
	c := sharedCluster(t)
	ctx := ctxFor(t, 10*time.Second)
	a, _ := Open[apiKey](c.node(0), BucketWebhooks)
	b, _ := Open[apiKey](c.node(1), BucketWebhooks)
	cc, _ := Open[apiKey](c.node(2), BucketWebhooks)
	key := fresh("whk_cas") // the cluster outlives a run (-count)

	rev1, err := a.Create(ctx, key, apiKey{Owner: "a"}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Create(ctx, key, apiKey{Owner: "b"}, 0); !errors.Is(err, ErrExists) {
		t.Fatalf("second Create: %v, want ErrExists", err)
	}
	rev2, err := b.Update(ctx, key, apiKey{Owner: "b"}, rev1)
	if err != nil {
		t.Fatalf("Update at the latest revision: %v", err)
	}
	if _, err := cc.Update(ctx, key, apiKey{Owner: "c"}, rev1); !errors.Is(err, ErrConflict) {
		t.Fatalf("Update at a stale revision: %v, want ErrConflict", err)
	}
	if err := cc.Delete(ctx, key, rev1); !errors.Is(err, ErrConflict) {
		t.Fatalf("Delete at a stale revision: %v, want ErrConflict", err)
	}
	// A Get is answered by any replica, so a's may lag a moment.
	testkit.Eventually(t, settle, func() bool {
		e, err := a.Get(ctx, key)
		return err == nil && e.Value.Owner == "b" && e.Revision == rev2
	})
	// Three nodes racing to claim one key: exactly one wins.
	var wins atomic.Int32
	var wg sync.WaitGroup
	race := fresh("whk_race")
	for i := range 3 {
		bk, _ := Open[apiKey](c.node(i), BucketWebhooks)
		wg.Go(func() {
			_, err := bk.Create(ctx, race, apiKey{Owner: c.opts[i].Node}, 0)
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, ErrExists):
				t.Errorf("node %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d Creates won, want 1", wins.Load())
	}
}

func TestForward(t *testing.T) {
	c := sharedCluster(t)
	ctx := ctxFor(t, 10*time.Second)
	release := make(chan struct{})
	srv, err := c.node(2).Serve(func(ctx context.Context, req Request) Response {
		switch req.Path {
		case "/v1/slow":
			select { // held until a later request is answered: each runs on its own
			case <-release:
			case <-ctx.Done():
			}
			return Response{Status: http.StatusOK}
		case "/v1/big":
			return Response{Status: http.StatusOK, Body: make([]byte, c.node(2).MaxBody()+1)}
		case "/v1/panic":
			panic("boom")
		}
		return Response{
			Status: http.StatusCreated,
			Header: http.Header{"Content-Type": {"application/json"}, "X-Served-By": {c.opts[2].Node}},
			Body:   fmt.Appendf(nil, `{"method":%q,"path":%q,"query":%q,"key":%q,"body":%q}`, req.Method, req.Path, req.Query, req.Header.Get("Idempotency-Key"), req.Body),
		}
	}, 8)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	waitInterest(t, c.node(0), "c")
	waitInterest(t, c.node(1), "c")

	slow := make(chan error, 1)
	go func() {
		_, err := c.node(0).Forward(ctx, "c", Request{Method: "GET", Path: "/v1/slow"})
		slow <- err
	}()

	start := time.Now()
	resp, err := c.node(0).Forward(ctx, "c", Request{Method: "POST", Path: "/v1/messages", Query: "x=1",
		Header: http.Header{"Idempotency-Key": {"k1"}}, Body: []byte("hello")})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("forwarded A→C in %s", time.Since(start).Round(time.Microsecond))
	want := `{"method":"POST","path":"/v1/messages","query":"x=1","key":"k1","body":"hello"}`
	if resp.Status != http.StatusCreated || string(resp.Body) != want || resp.Header.Get("X-Served-By") != "c" ||
		resp.Header.Get("Content-Type") != "application/json" {
		t.Errorf("response %d %v %s, want 201 from c with %s", resp.Status, resp.Header, resp.Body, want)
	}
	close(release)
	if err := <-slow; err != nil {
		t.Errorf("the slow request: %v", err)
	}

	// Bodies over the limit are refused, either way.
	_, err = c.node(0).Forward(ctx, "c", Request{Method: "POST", Path: "/v1/files", Body: make([]byte, c.node(0).MaxBody()+1)})
	var tooLarge *TooLargeError
	if !errors.Is(err, ErrTooLarge) || !errors.As(err, &tooLarge) || tooLarge.What != "request" {
		t.Errorf("large request: %v, want a request TooLargeError", err)
	}
	_, err = c.node(0).Forward(ctx, "c", Request{Method: "GET", Path: "/v1/big"})
	if !errors.As(err, &tooLarge) || tooLarge.What != "response" {
		t.Errorf("large response: %v, want a response TooLargeError", err)
	}
	resp, err = c.node(1).Forward(ctx, "c", Request{Method: "GET", Path: "/v1/panic"})
	if err != nil || resp.Status != http.StatusInternalServerError {
		t.Errorf("panicking handler: %d, %v; want 500", resp.Status, err)
	}

	// A node that answers nothing in time: ErrTimeout, not ErrNodeDown.
	hold := make(chan struct{})
	srvB, err := c.node(1).Serve(func(ctx context.Context, req Request) Response {
		<-hold // deaf to ctx, as a stuck node is
		return Response{Status: http.StatusOK}
	}, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(hold); srvB.Stop() })
	waitInterest(t, c.node(0), "b")
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	_, err = c.node(0).Forward(short, "b", Request{Method: "POST", Path: "/v1/messages"})
	if !errors.Is(err, ErrTimeout) || errors.Is(err, ErrNodeDown) {
		t.Errorf("Forward to a node that does not answer: %v, want ErrTimeout", err)
	}
}

// The embedded server refuses clients without the secret.
func TestClientNeedsSecret(t *testing.T) {
	c := sharedCluster(t)
	url := c.node(0).ClientURL()
	if url == "" {
		t.Fatal("no client URL")
	}
	for name, opts := range map[string][]nats.Option{
		"no credentials":     nil,
		"wrong password":     {nats.UserInfo(ClientUser, ClientPassword("another secret entirely"))},
		"the secret itself":  {nats.UserInfo(ClientUser, testSecret)},
		"the route password": {nats.UserInfo(RouteUser, RoutePassword(testSecret))},
		"a token":            {nats.Token(testSecret)},
	} {
		nc, err := nats.Connect(url, append(opts, nats.MaxReconnects(0), nats.Timeout(2*time.Second))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected, want refused", name)
		} else if !errors.Is(err, nats.ErrAuthorization) && !strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Errorf("%s: %v, want an authorization error", name, err)
		}
	}
	nc, err := nats.Connect(url, nats.UserInfo(ClientUser, ClientPassword(testSecret)))
	if err != nil {
		t.Fatalf("with the secret: %v", err)
	}
	nc.Close()
}

// A node with another secret cannot join: its routes are refused, and it
// never becomes ready.
func TestNodeNeedsSecret(t *testing.T) {
	c := sharedCluster(t)
	ports, err := freePorts(1)
	if err != nil {
		t.Fatal(err)
	}
	routes := append([]string{fmt.Sprintf("nats://127.0.0.1:%d", ports[0])}, c.opts[0].Routes...)
	buf := &testkit.LogBuffer{}
	before := c.node(0).Server().NumRoutes()
	start := time.Now()
	n, err := Start(context.Background(), Options{
		Node: "stranger", Secret: "not-the-fleet-secret-at-all", Listen: "127.0.0.1:0",
		Cluster: fmt.Sprintf("127.0.0.1:%d", ports[0]), Routes: routes, StoreDir: t.TempDir(),
		StartTimeout: 1500 * time.Millisecond,
		Logger:       slog.New(slog.NewTextHandler(buf, nil)),
	})
	if err == nil {
		n.Close()
		t.Fatal("a node with another secret started")
	}
	t.Logf("refused after %s: %v", time.Since(start).Round(time.Millisecond), err)
	t.Logf("the stranger's log:\n%s", buf.String())
	// The members logged the refused routes, and still have their routes
	// among themselves only.
	testkit.Eventually(t, settle, func() bool { return strings.Contains(c.logsText(), `authentication error - User`) })
	if got := c.node(0).Server().NumRoutes(); got != before {
		t.Errorf("node a has %d routes, had %d", got, before)
	}
	if jsz, err := c.node(0).Server().Jsz(nil); err != nil || jsz.Meta == nil || jsz.Meta.Size != 3 {
		t.Errorf("meta group: %+v, %v; want 3 peers", jsz.Meta, err)
	}
}

// An event published twice with one ID is in the stream once; a stale
// expectation is refused, and Resync finds the last event.
func TestPublishOnce(t *testing.T) {
	c := sharedCluster(t)
	ctx := ctxFor(t, 10*time.Second)
	a := c.node(0)
	p := a.Publisher(0)
	if _, err := p.Resync(ctx); err != nil { // other tests may have published from a
		t.Fatal(err)
	}
	topic := fresh("lin_x.once") // the cluster outlives a run (-count)
	ev := Event{ID: fresh("a:once-"), Topic: topic, Header: map[string][]string{"Bl-Local-Seq": {"1001"}}, Data: []byte(`{"n":1}`)}
	first, err := p.Publish(ctx, ev)
	if err != nil || first.Duplicate {
		t.Fatalf("first publish: %+v, %v", first, err)
	}
	again, err := p.Publish(ctx, ev)
	if err != nil || !again.Duplicate || again.Seq != first.Seq {
		t.Fatalf("second publish: %+v, %v; want a duplicate of seq %d", again, err, first.Seq)
	}
	// A publisher that lost the acknowledgement (expects what came before
	// it): the stream keeps the event once, whichever guard speaks first.
	if got, err := a.Publisher(first.Seq-1).Publish(ctx, ev); err == nil && !got.Duplicate {
		t.Fatalf("stale publisher stored it again: %+v", got)
	}
	// A new event behind a stale expectation is refused.
	stale := a.Publisher(0)
	if _, err := stale.Publish(ctx, Event{ID: "a:1002", Topic: "lin_x.once"}); !errors.Is(err, ErrWrongLastSequence) {
		t.Fatalf("new event with a stale expectation: %v, want ErrWrongLastSequence", err)
	}
	id, err := stale.Resync(ctx)
	if err != nil || id != ev.ID || stale.LastSeq() != first.Seq {
		t.Fatalf("Resync = %q, %v (last %d); want %s at %d", id, err, stale.LastSeq(), ev.ID, first.Seq)
	}
	info, err := a.events.Info(ctx, jetstream.WithSubjectFilter("bl.evt.a."+topic))
	if err != nil {
		t.Fatal(err)
	}
	if n := info.State.Subjects["bl.evt.a."+topic]; n != 1 {
		t.Errorf("the stream holds %d copies, want 1", n)
	}
}

// A durable consumer: an event whose first delivery asks for a retry is
// delivered again after the schedule's wait, then acknowledged once.
func TestConsumerRetry(t *testing.T) {
	c := sharedCluster(t)
	ctx := ctxFor(t, 15*time.Second)
	topic := fresh("retry_test") // the cluster outlives a run (-count)
	cfg := ConsumerConfig{
		Name: fresh("wh_retry"), Topics: []string{"*.*." + topic}, AckWait: 5 * time.Second,
		Schedule: []time.Duration{400 * time.Millisecond, time.Second}, Workers: 2,
	}
	if err := c.node(1).EnsureConsumer(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if err := c.node(2).EnsureConsumer(ctx, cfg); err != nil { // every node may
		t.Fatal(err)
	}
	type attempt struct {
		d  Delivery
		at time.Time
	}
	got := make(chan attempt, 10)
	for _, i := range []int{1, 2} { // two nodes pull; either delivers
		run, err := c.node(i).Consume(context.Background(), cfg, func(ctx context.Context, d Delivery) Outcome {
			got <- attempt{d, time.Now()}
			if d.Attempt == 1 {
				return Retry
			}
			return Delivered
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(run.Stop)
	}
	pub, err := c.node(0).Publisher(0), error(nil)
	if _, err = pub.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	evID := fresh("a:retry-")
	ack, err := pub.Publish(ctx, Event{ID: evID, Topic: "lin_r." + topic, Data: []byte("payload")})
	if err != nil {
		t.Fatal(err)
	}
	var first, second attempt
	for i, dst := range []*attempt{&first, &second} {
		select {
		case *dst = <-got:
		case <-ctx.Done():
			t.Fatalf("attempt %d never came", i+1)
		}
	}
	if first.d.Attempt != 1 || second.d.Attempt != 2 || first.d.ID != evID || second.d.ID != evID ||
		first.d.StreamSeq != ack.Seq || second.d.StreamSeq != ack.Seq || first.d.Node != "a" || first.d.Topic != "lin_r."+topic ||
		!bytes.Equal(second.d.Data, []byte("payload")) || first.d.Last || second.d.Last {
		t.Errorf("deliveries %+v then %+v", first.d, second.d)
	}
	if wait := second.at.Sub(first.at); wait < 350*time.Millisecond {
		t.Errorf("redelivered after %s, want the 400ms of the schedule", wait)
	} else {
		t.Logf("redelivered after %s", wait.Round(time.Millisecond))
	}
	// Acknowledged once: nothing pending, nothing to redeliver.
	testkit.Eventually(t, settle, func() bool {
		info, err := c.node(0).ConsumerInfo(ctx, cfg.Name)
		return err == nil && info.AckFloor.Stream == ack.Seq && info.NumAckPending == 0 && info.NumRedelivered == 0 && info.NumPending == 0
	})
	select {
	case extra := <-got:
		t.Errorf("an extra delivery: %+v", extra.d)
	default:
	}
	if err := c.node(0).DeleteConsumer(ctx, cfg.Name); err != nil {
		t.Error(err)
	}
}

func TestRetryDelay(t *testing.T) {
	s := []time.Duration{time.Second, time.Minute}
	for _, tt := range []struct {
		attempt int
		want    time.Duration
		ok      bool
	}{{0, 0, false}, {1, time.Second, true}, {2, time.Minute, true}, {3, 0, false}} {
		if got, ok := RetryDelay(s, tt.attempt); got != tt.want || ok != tt.ok {
			t.Errorf("RetryDelay(%d) = %s, %v; want %s, %v", tt.attempt, got, ok, tt.want, tt.ok)
		}
	}
}

// The line directory: a node's refresh is read on another; an entry older
// than the TTL reads as down; another node's line is left alone.
func TestDirectory(t *testing.T) {
	c := sharedCluster(t)
	ctx := ctxFor(t, 10*time.Second)
	var mu sync.Mutex
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	lines := []LineEntry{{Line: "lin_dir1", Handle: "+15550000001", Health: "ok", Capabilities: []string{"imessage"}}}

	dirA, err := c.node(0).Directory(DirectoryOptions{Lines: func() []LineEntry { return lines }, Interval: time.Second, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	if err := dirA.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	dirB, _ := c.node(1).Directory(DirectoryOptions{Interval: time.Second, Clock: clock})
	var e Entry[LineEntry]
	testkit.Eventually(t, settle, func() bool { // any replica answers: it may lag
		e, err = dirB.Lookup(ctx, "lin_dir1")
		return err == nil
	})
	if e.Value.Node != "a" || e.Value.Handle != "+15550000001" || !e.Value.UpdatedAt.Equal(now) || !dirB.Up(e.Value) {
		t.Fatalf("Lookup on b = %+v, %v; want a's line, up", e, err)
	}
	advance(3*time.Second + time.Millisecond) // TTL 3s: down
	if dirB.Up(e.Value) {
		t.Error("an entry older than the TTL is up")
	}
	if err := dirA.Refresh(ctx); err != nil { // a refresh brings it back
		t.Fatal(err)
	}
	testkit.Eventually(t, settle, func() bool { // any replica answers: it may lag
		e, err := dirB.Lookup(ctx, "lin_dir1")
		return err == nil && dirB.Up(e.Value)
	})

	// C claims to serve the same line: refused, a's entry kept.
	dirC, _ := c.node(2).Directory(DirectoryOptions{Lines: func() []LineEntry { return lines }, Interval: time.Second, Clock: clock})
	if err := dirC.Refresh(ctx); !errors.Is(err, ErrLineClaimed) {
		t.Errorf("c's refresh of a's line: %v, want ErrLineClaimed", err)
	}
	if err := dirC.Release(ctx, "lin_dir1"); !errors.Is(err, ErrLineClaimed) {
		t.Errorf("c's release of a's line: %v, want ErrLineClaimed", err)
	}

	// Run refreshes on its own, every Interval.
	dirA.o.Interval = 50 * time.Millisecond
	advance(time.Hour)
	stop := dirA.Run(context.Background())
	defer stop()
	testkit.Eventually(t, settle, func() bool {
		e, err := dirB.Lookup(ctx, "lin_dir1")
		return err == nil && e.Value.UpdatedAt.Equal(clock())
	})
	stop()
	if err := dirA.Release(ctx, "lin_dir1"); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, settle, func() bool {
		_, err := dirB.Lookup(ctx, "lin_dir1")
		return errors.Is(err, ErrNotFound)
	})
}

// A node of its own cluster stops: forwarding to it fails at once with
// ErrNodeDown, and the two others go on writing.
func TestForwardToStoppedNode(t *testing.T) {
	c, err := startTestCluster(t.TempDir(), 3, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	dumpOnFailure(t, c)
	ctx := ctxFor(t, 20*time.Second)
	srv, err := c.node(2).Serve(func(ctx context.Context, req Request) Response { return Response{Status: 200} }, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	waitInterest(t, c.node(0), "c")
	if resp, err := c.node(0).Forward(ctx, "c", Request{Method: "GET", Path: "/"}); err != nil || resp.Status != 200 {
		t.Fatalf("before the stop: %d, %v", resp.Status, err)
	}
	if err := c.node(2).Close(); err != nil {
		t.Fatal(err)
	}
	var took time.Duration
	testkit.Eventually(t, settle, func() bool {
		start := time.Now()
		_, err := c.node(0).Forward(ctx, "c", Request{Method: "GET", Path: "/"})
		took = time.Since(start)
		return errors.Is(err, ErrNodeDown)
	})
	if took > 100*time.Millisecond {
		t.Errorf("ErrNodeDown took %s, want at once", took)
	}
	t.Logf("ErrNodeDown in %s", took)
	// Two of three: writes go on.
	b, _ := Open[apiKey](c.node(1), BucketKeys)
	err = retry(ctx, time.Second, func(ctx context.Context) error {
		_, err := b.Put(ctx, "key_after_stop", apiKey{Owner: "b"})
		return err
	})
	if err != nil {
		t.Errorf("a write with one node of three down: %v", err)
	}
}

// One host: a standalone server, one replica.
func TestStandalone(t *testing.T) {
	buf := &testkit.LogBuffer{}
	n, err := Start(context.Background(), Options{Node: "solo", Secret: testSecret, Listen: "127.0.0.1:0", StoreDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(buf, nil))})
	if err != nil {
		t.Fatalf("%v\n%s", err, buf)
	}
	defer n.Close()
	if n.Replicas() != 1 || n.ClusterAddr() != "" {
		t.Errorf("replicas %d, cluster %q; want 1, none", n.Replicas(), n.ClusterAddr())
	}
	ctx := ctxFor(t, 5*time.Second)
	b, _ := Open[apiKey](n, BucketSandbox)
	if _, err := b.Create(ctx, "own_1", apiKey{Owner: "me"}, 0); err != nil {
		t.Fatal(err)
	}
	keys, err := b.Keys(ctx)
	if err != nil || len(keys) != 1 {
		t.Errorf("Keys = %v, %v", keys, err)
	}
	// Sessions take a per-key TTL.
	s, _ := Open[apiKey](n, BucketSessions)
	if _, err := s.Create(ctx, "ses_1", apiKey{Owner: "me"}, time.Hour); err != nil {
		t.Errorf("a session with a TTL: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Error(err)
	}
	if err := n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func TestOptionsRefused(t *testing.T) {
	for name, o := range map[string]Options{
		"no secret":         {Node: "a", StoreDir: "x"},
		"bad node":          {Node: "a.b", Secret: testSecret, StoreDir: "x"},
		"no store":          {Node: "a", Secret: testSecret},
		"routes no cluster": {Node: "a", Secret: testSecret, StoreDir: "x", Routes: []string{"nats://127.0.0.1:1"}},
		"url and cluster":   {Node: "a", Secret: testSecret, URL: "nats://127.0.0.1:1", Cluster: "127.0.0.1:2"},
	} {
		if n, err := Start(context.Background(), o); err == nil {
			n.Close()
			t.Errorf("%s: started", name)
		}
	}
}

// Two nodes cannot hold three replicas: Start fails when its time is up,
// and says why.
func TestTwoNodesRefused(t *testing.T) {
	_, err := startTestCluster(t.TempDir(), 2, func(i int, o *Options) { o.StartTimeout = 1500 * time.Millisecond })
	if err == nil {
		t.Fatal("a fleet of two nodes started")
	}
	msg := err.Error()
	if !strings.Contains(msg, "JetStream knows 2 peers") || !strings.Contains(msg, "a fleet of two cannot keep a majority") {
		t.Errorf("error %.600s\nsays neither how many peers there are nor why two do not do", msg)
	}
}

// settle bounds what the fleet does in a fraction of a second (a write
// seen by a watcher, a log line, a redelivery): far above it, so that a
// loaded machine does not fail the tests. The figures are the benchmark's.
const settle = 10 * time.Second

var freshNames atomic.Int64

// fresh is name made unique in the test process: the shared cluster
// outlives a test, and a test run again (-count) must not find its own
// keys, events or consumers of the run before.
func fresh(name string) string { return fmt.Sprintf("%s%d", name, freshNames.Add(1)) }
