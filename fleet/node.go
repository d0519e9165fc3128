package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Node is this host in the fleet: its embedded NATS server (or none, with
// Options.URL), its connection, and the buckets and stream it provisioned.
type Node struct {
	opts Options
	log  *slog.Logger
	srv  *server.Server // nil with Options.URL
	nc   *nats.Conn
	js   jetstream.JetStream

	buckets map[string]jetstream.KeyValue
	events  jetstream.Stream
	// eventsSig wakes the readers of the events stream (read.go).
	eventsSig eventsSignal

	closed chan struct{} // closed by the connection's ClosedHandler

	mu       sync.Mutex
	stoppers []func() // what Close stops before the connection, newest first
	done     bool
}

// Start starts the node: the embedded NATS server and an in-process
// connection to it (or a connection to Options.URL), then waits for
// JetStream and provisions the buckets and the events stream. Every
// JetStream call gets Options.AttemptTimeout and is retried (a cluster
// elects its leaders while the first calls go unanswered) until
// Options.StartTimeout or ctx ends. On error nothing is left running.
func Start(ctx context.Context, o Options) (*Node, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	n := &Node{opts: o, log: o.Logger.With("node", o.Node), closed: make(chan struct{}), buckets: map[string]jetstream.KeyValue{}}
	if o.URL == "" {
		if err := n.startServer(); err != nil {
			return nil, err
		}
	}
	if err := n.connect(); err != nil {
		n.shutdownServer()
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.StartTimeout)
	defer cancel()
	if err := n.provision(ctx); err != nil {
		n.Close()
		return nil, err
	}
	return n, nil
}

func (n *Node) startServer() error {
	o := n.opts
	host, port, err := splitPort(o.Listen)
	if err != nil {
		return fmt.Errorf("fleet: listen %q: %w", o.Listen, err)
	}
	so := &server.Options{
		ServerName: o.Node,
		Host:       host,
		Port:       port,
		// Otherwise NewServer traps SIGINT and SIGTERM and calls os.Exit.
		NoSigs:                 true,
		JetStream:              true,
		StoreDir:               o.StoreDir,
		JetStreamMaxMemory:     64 << 20, // file storage only; this caps memory assets
		JetStreamMaxStore:      o.MaxStore,
		DisableJetStreamBanner: true,
		ReconnectErrorReports:  60,
		Users:                  []*server.User{{Username: ClientUser, Password: ClientPassword(o.Secret)}},
	}
	if o.Cluster == "" {
		// One copy only: fsync often, as bbolt would (the default is every
		// 2 minutes, which three replicas cover but one does not).
		so.SyncInterval = 2 * time.Second
	} else {
		chost, cport, err := splitPort(o.Cluster)
		if err != nil {
			return fmt.Errorf("fleet: cluster %q: %w", o.Cluster, err)
		}
		so.Cluster = server.ClusterOpts{
			Name: clusterName, Host: chost, Port: cport,
			Username: RouteUser, Password: RoutePassword(o.Secret),
			TLSConfig: o.RouteTLS, TLSTimeout: 2,
			ConnectBackoff: true,
			// A peer that vanished without closing its sockets is noticed
			// after PingInterval × MaxPingsOut, not the default minutes.
			PingInterval: 5 * time.Second, MaxPingsOut: 3,
		}
		for _, r := range o.Routes {
			u, err := url.Parse(r)
			if err != nil || u.Host == "" {
				return fmt.Errorf("fleet: route %q is not nats://host:port", r)
			}
			// An explicit route dials with the credentials of its URL only.
			u.User = url.UserPassword(RouteUser, RoutePassword(o.Secret))
			so.Routes = append(so.Routes, u)
		}
	}
	s, err := server.NewServer(so)
	if err != nil {
		return fmt.Errorf("fleet: NATS server: %w", err)
	}
	logger := &natsLogger{log: n.log.With("component", "nats")}
	s.SetLoggerV2(logger, false, false, false)
	s.Start() // returns at once; the listeners start in the background
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		s.WaitForShutdown()
		why := logger.lastFatal()
		if why == "" {
			why = "its listeners are not up after 10s"
		}
		return fmt.Errorf("fleet: the NATS server did not start: %s", why)
	}
	n.srv = s
	return nil
}

// splitPort parses host:port, with port 0 meaning any free port (NATS's
// RANDOM_PORT: its own 0 means the default port).
func splitPort(addr string) (string, int, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number from 0 to 65535", p)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	return host, port, nil
}

func (n *Node) connect() error {
	o := n.opts
	opts := []nats.Option{
		nats.Name("blueline-" + o.Node),
		nats.ClosedHandler(func(*nats.Conn) { close(n.closed) }),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subject := ""
			if sub != nil {
				subject = sub.Subject
			}
			n.log.Warn("fleet: NATS connection", "subject", subject, "err", err)
		}),
	}
	target := o.URL
	if n.srv != nil {
		target = ""
		opts = append(opts, nats.InProcessServer(n.srv), nats.UserInfo(ClientUser, ClientPassword(o.Secret)))
	} else {
		// A daemon's connection must outlive any outage, and notice a dead
		// peer in a minute rather than the default minutes.
		opts = append(opts, nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
			nats.PingInterval(20*time.Second), nats.MaxPingsOutstanding(3),
			nats.DisconnectErrHandler(func(_ *nats.Conn, err error) { n.log.Warn("fleet: disconnected from NATS", "err", err) }),
			nats.ReconnectHandler(func(nc *nats.Conn) { n.log.Info("fleet: reconnected to NATS", "url", nc.ConnectedUrlRedacted()) }))
		if !strings.Contains(o.URL, "@") {
			opts = append(opts, nats.Token(o.Secret))
		}
		if o.ClientTLS != nil {
			opts = append(opts, nats.Secure(o.ClientTLS))
		}
	}
	nc, err := nats.Connect(target, opts...)
	if err != nil {
		return fmt.Errorf("fleet: connecting to NATS: %w", err)
	}
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(o.AttemptTimeout))
	if err != nil {
		nc.Close()
		return fmt.Errorf("fleet: %w", err)
	}
	n.nc, n.js = nc, js
	return nil
}

// Close stops what runs on the node (forwarding servers, consumers,
// watchers and directory loops, newest first), drains the connection and
// shuts the embedded server down: its Raft groups step down first, so the
// other nodes go on at once. It may be called more than once.
func (n *Node) Close() error {
	n.mu.Lock()
	if n.done {
		n.mu.Unlock()
		return nil
	}
	n.done = true
	stoppers := n.stoppers
	n.stoppers = nil
	n.mu.Unlock()
	for i := len(stoppers) - 1; i >= 0; i-- {
		stoppers[i]()
	}
	var err error
	if n.nc != nil {
		if derr := n.nc.Drain(); derr != nil {
			n.nc.Close()
		}
		select {
		case <-n.closed:
		case <-time.After(5 * time.Second):
			n.nc.Close()
			err = errors.New("fleet: the NATS connection did not drain within 5s")
		}
	}
	n.shutdownServer()
	return err
}

func (n *Node) shutdownServer() {
	if n.srv != nil {
		n.srv.Shutdown()
		n.srv.WaitForShutdown()
	}
}

// onClose registers stop to run when the node closes; it returns false
// (and registers nothing) when the node is closed already.
func (n *Node) onClose(stop func()) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done {
		return false
	}
	n.stoppers = append(n.stoppers, stop)
	return true
}

// Name is the node's name.
func (n *Node) Name() string { return n.opts.Node }

// Replicas is how many copies of each bucket, stream and consumer the
// fleet keeps.
func (n *Node) Replicas() int { return n.opts.Replicas }

// Conn is the node's NATS connection.
func (n *Node) Conn() *nats.Conn { return n.nc }

// JetStream is the node's JetStream context.
func (n *Node) JetStream() jetstream.JetStream { return n.js }

// ClientURL is the embedded server's client address (nats://host:port),
// "" with Options.URL.
func (n *Node) ClientURL() string {
	if n.srv == nil {
		return ""
	}
	return n.srv.ClientURL()
}

// ClusterAddr is the embedded server's cluster address, "" when it has
// none.
func (n *Node) ClusterAddr() string {
	if n.srv == nil {
		return ""
	}
	if a := n.srv.ClusterAddr(); a != nil {
		return a.String()
	}
	return ""
}

// Server is the embedded NATS server, nil with Options.URL: for status
// (Varz, Jsz, Healthz), never to be shut down by anyone but Close.
func (n *Node) Server() *server.Server { return n.srv }

// Subject of the events a node publishes: "<prefix>.evt.<node>.<topic>".
func (n *Node) eventSubject(node, topic string) string {
	return n.opts.Prefix + ".evt." + node + "." + topic
}

// forwardSubject is where node answers forwarded requests.
func (n *Node) forwardSubject(node string) string {
	return n.opts.Prefix + ".node." + node + ".api"
}

// retry calls f, each time with a deadline of at most attempt, until it
// succeeds, fails in a way that retrying cannot mend, or ctx ends: never
// one long wait, since JetStream leaves calls unanswered while it elects
// its leaders.
func retry(ctx context.Context, attempt time.Duration, f func(ctx context.Context) error) error {
	return retryIf(ctx, attempt, f, transient)
}

// retryIf is retry with again telling which errors are worth another try.
// Each attempt after a timeout gets twice as long, up to 16 times the
// first: a host so loaded that JetStream answers in more than attempt
// (a cluster forming on a busy Mac) would otherwise never be answered.
func retryIf(ctx context.Context, attempt time.Duration, f func(ctx context.Context) error, again func(error) bool) error {
	wait, longest := 25*time.Millisecond, 16*attempt
	for {
		actx, cancel := context.WithTimeout(ctx, attempt)
		err := f(actx)
		cancel()
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || !again(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
		if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) {
			attempt = min(2*attempt, longest)
		}
	}
}

// transient reports whether err says "not yet": no answer in time, nobody
// answering (an election), JetStream not available yet, or too few peers
// joined so far for the replicas asked.
func transient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, nats.ErrTimeout) || errors.Is(err, nats.ErrNoResponders) ||
		errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrJetStreamNotEnabled) ||
		errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		switch api.ErrorCode {
		case 10005, 10008, jetstream.JSErrCodeJetStreamNotEnabled: // no suitable peers; temporarily unavailable
			return true
		}
		return api.Code == 503
	}
	return false
}

// natsLogger passes the embedded server's logs to slog. Fatal is logged as
// an error, never exits: the server then returns from Start half-started,
// which ReadyForConnections reports.
type natsLogger struct {
	log   *slog.Logger
	mu    sync.Mutex
	fatal string
}

func (l *natsLogger) Noticef(format string, v ...any) { l.at(slog.LevelInfo, format, v) }
func (l *natsLogger) Warnf(format string, v ...any)   { l.at(slog.LevelWarn, format, v) }
func (l *natsLogger) Errorf(format string, v ...any)  { l.at(slog.LevelError, format, v) }
func (l *natsLogger) Debugf(format string, v ...any)  { l.at(slog.LevelDebug, format, v) }
func (l *natsLogger) Tracef(format string, v ...any)  { l.at(slog.LevelDebug, format, v) }
func (l *natsLogger) Fatalf(format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	l.mu.Lock()
	l.fatal = msg
	l.mu.Unlock()
	l.log.Error(msg)
}

func (l *natsLogger) at(level slog.Level, format string, v []any) {
	switch {
	case strings.HasPrefix(format, "Plaintext passwords detected"):
		// Harmless: the passwords are derived and held in memory only.
		level = slog.LevelDebug
	case strings.HasPrefix(format, "Error trying to connect to route"):
		// Every node that starts before its peers says so; a peer that
		// stays away is reported every ReconnectErrorReports attempts.
		level = min(level, slog.LevelWarn)
	}
	if !l.log.Enabled(context.Background(), level) {
		return
	}
	l.log.Log(context.Background(), level, fmt.Sprintf(format, v...))
}

func (l *natsLogger) lastFatal() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}
