// Package fleet is the foundation of fleet mode: several Blueline hosts
// serving one API over NATS JetStream, embedded (nats-server as a library)
// or an existing NATS. It imports nothing of Blueline's. The daemon starts a
// node when [fleet] is set (daemon/fleet.go) and builds on it: the control
// plane (package fleet/control), the routing of line-scoped requests
// (fleet/route) and the events and webhooks (fleet/relay). Here:
//
//   - A node (Start, Close): an embedded NATS server named after the node,
//     its client port on loopback (port 0 is a free port, never NATS's
//     4222), its cluster port and routes when clustered, JetStream in a store
//     folder of its own, no signal handlers, its logs in slog; and an
//     in-process connection to it. Or a connection to Options.URL that
//     reconnects forever. Every JetStream call at start gets a short
//     deadline and is retried within Options.StartTimeout. Close stops what
//     runs on the node, drains the connection, then shuts the server down.
//
//   - Authentication from the fleet's secret: clients log in as ClientUser,
//     routes as RouteUser, each with a password derived from the secret by
//     HMAC-SHA256 (ClientPassword, RoutePassword), so the secret itself never
//     travels and a leaked client password does not open the routes. Route
//     URLs are given without credentials; the node adds them. With
//     Options.URL, credentials in the URL are used, else the secret is sent
//     as a token. Routes take mutual TLS when Options.RouteTLS is set
//     (RouteTLSFromFiles), or server-authenticated TLS with a
//     certificate the node has for its name (RouteTLSFromCertificate: the
//     [tls] section's ACME certificates).
//
//   - The control plane in JetStream KV: buckets "<prefix>_keys", _webhooks,
//     _sandbox, _sessions (per-key TTLs) and _lines, through Bucket[T] (JSON
//     values): Get, Put, Create (ErrExists), Update at a revision
//     (compare-and-set, ErrConflict), Delete, Keys, and Watch (the current
//     values, then every change; rebuilt with back-off if NATS ends it). A
//     Get is answered by any replica and may lag a write made elsewhere.
//
//   - Replicas: three of every bucket, stream and consumer when clustered,
//     one for a standalone server (a host alone: no cluster setting). Three
//     nodes is the smallest cluster: with two, the replicas cannot be placed
//     and Start fails when its time is up, saying so (two nodes cannot keep
//     a majority when either is down; a single node configured as a cluster
//     never elects a leader). A fourth node and more add peers, and the
//     assets stay at three replicas.
//
//   - The line directory (Directory): entries {line, handle, node, health,
//     capabilities, updated_at} keyed by line ID; each node refreshes its
//     own (Refresh, or Run every Interval, with an injectable clock), never
//     takes over another node's line (ErrLineClaimed), and a reader takes an
//     entry older than the TTL as down (Up).
//
//   - Forwarding (Serve, Forward): request/reply on "<prefix>.node.<node>.api",
//     method, path, query and headers in NATS headers, the body as the
//     payload. Serve runs each request on its own goroutine (bounded).
//     Forward returns ErrNodeDown at once when nobody serves the node (answer
//     503 line_unavailable with Retry-After) and ErrTimeout when the node
//     did not answer in time (outcome unknown: never retried elsewhere).
//     Bodies are not split: one larger than MaxBody (NATS's max payload, 1
//     MiB by default, less 64 KiB for headers), request or response, is
//     refused with a TooLargeError; big files are for a node-to-node path.
//
//   - Events: one stream "<prefix>_events" on "<prefix>.evt.<node>.<topic>",
//     limits retention (96h, 1 GiB by default). Publisher publishes a node's
//     events serially with their ID as Nats-Msg-Id and the expected last
//     sequence on the node's own subjects, which does not expire as ID dedupe
//     does; Resync finds the node's last event after an unknown outcome. One
//     durable pull consumer per webhook (EnsureConsumer), explicit ack;
//     Consume delivers on a few workers and retries with NakWithDelay of the
//     schedule's wait for the attempt (NumDelivered, counted across nodes),
//     terminating the last attempt. Generic bytes and headers (package
//     fleet/relay reads the daemon's event log into it).
//
//   - Heartbeats (Beat, Nodes: bucket "<prefix>_nodes") and Status (the
//     stream's, buckets' and consumers' state) for `blueline fleet status`.
//
// The control records' replication between a host's bbolt and the
// buckets, and the join (seed, reconcile or refuse), are package
// fleet/control's.
//
// Not done: fencing forwarded requests with the directory revision;
// heartbeats with TTL markers (a node is down when its heartbeat is older
// than three beats, by the reader's clock); `blueline fleet remove-node`
// (JetStream's peer remove); a SIGSTOP (frozen node) test. SIGKILL of a node is tested end to end (e2e/fleet_test.go).
package fleet
