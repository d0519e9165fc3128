package fleet

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"time"
)

// Options configure a node. Node and Secret are required; with URL empty
// the node runs its own NATS server (Listen, Cluster, Routes, StoreDir),
// else it connects to URL.
type Options struct {
	// Node is this host's name: the NATS server's name and JetStream peer,
	// and a token of its subjects. 1 to 32 letters, digits, '-' or '_'.
	Node string
	// Secret is shared by the fleet; see ClientPassword and RoutePassword
	// for what is derived from it.
	Secret string
	// Prefix starts the name of every bucket ("<prefix>_keys"), stream
	// ("<prefix>_events") and subject ("<prefix>.node.…"), so that two
	// fleets, or two tests, can share one NATS. Default "bl".
	Prefix string

	// Listen is the embedded server's client port, host:port on loopback;
	// port 0 takes a free port (never NATS's own meaning of 0, 4222).
	// Default "127.0.0.1:4222".
	Listen string
	// Cluster is where the embedded server accepts routes, host:port; ""
	// runs it alone (standalone JetStream, one copy of everything). Port 0
	// takes a free port.
	Cluster string
	// Routes are the cluster addresses of the nodes, nats://host:port,
	// without credentials (they are added from Secret). This node's own
	// may be in the list.
	Routes []string
	// RouteTLS, when set, is used to accept and to dial routes (see
	// RouteTLSFromFiles).
	RouteTLS *tls.Config
	// StoreDir is the JetStream store's folder, the node's own: required
	// for an embedded server. NATS adds a "jetstream" folder inside it.
	StoreDir string
	// MaxStore caps the embedded server's JetStream disk use. Default 2 GiB.
	MaxStore int64

	// URL is an existing NATS with JetStream ("nats://user:pass@host:4222",
	// several comma-separated). Without credentials in it, the node sends
	// Secret as a token.
	URL string
	// ClientTLS, with URL, is the TLS configuration towards it.
	ClientTLS *tls.Config

	// Replicas of every bucket, stream and consumer. 0 chooses: 1 for a
	// standalone embedded server, else 3. See the package documentation.
	Replicas int

	// Logger receives the node's and the embedded server's logs. Default
	// slog.Default().
	Logger *slog.Logger

	// StartTimeout bounds Start's wait for JetStream to be ready and its
	// buckets and stream to be provisioned. Default 60s.
	StartTimeout time.Duration
	// AttemptTimeout bounds the first try of each JetStream call within the
	// retries of Start (and the directory's writes); each try after a
	// timeout gets twice as long, up to 16 times it. Default 500ms.
	AttemptTimeout time.Duration

	// EventsMaxAge and EventsMaxBytes are the events stream's limits.
	// Defaults 96h (the 3-day retry horizon and a day's outage) and 1 GiB.
	// The buckets (5 × BucketMaxBytes) and EventsMaxBytes are reserved on
	// each replica and must fit in MaxStore.
	EventsMaxAge   time.Duration
	EventsMaxBytes int64
	// EventsDuplicates is the stream's window for deduplicating message
	// IDs. Default 10m.
	EventsDuplicates time.Duration
}

// Defaults of Options.
const (
	DefaultPrefix         = "bl"
	DefaultListen         = "127.0.0.1:4222"
	DefaultMaxStore       = 2 << 30
	DefaultStartTimeout   = 60 * time.Second
	DefaultAttemptTimeout = 500 * time.Millisecond
	DefaultEventsMaxAge   = 96 * time.Hour
	DefaultEventsMaxBytes = 1 << 30
	DefaultDuplicates     = 10 * time.Minute
)

// clusterName is the NATS cluster's name, the same on every node.
const clusterName = "blueline"

// The users the embedded server knows: one for clients (the node's own
// in-process connection), one for routes.
const (
	ClientUser = "blueline"
	RouteUser  = "blueline-route"
)

var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,31}$`)

// withDefaults checks o and fills in its defaults.
func (o Options) withDefaults() (Options, error) {
	var errs []error
	if !namePattern.MatchString(o.Node) {
		errs = append(errs, fmt.Errorf("fleet: node name %q: must be 1 to 32 letters, digits, '-' or '_', starting with a letter or digit", o.Node))
	}
	if o.Secret == "" {
		errs = append(errs, errors.New("fleet: no secret: nothing joins or connects to the fleet without it"))
	}
	if o.Prefix == "" {
		o.Prefix = DefaultPrefix
	}
	if !namePattern.MatchString(o.Prefix) {
		errs = append(errs, fmt.Errorf("fleet: prefix %q: must be 1 to 32 letters, digits, '-' or '_'", o.Prefix))
	}
	if o.URL == "" {
		if o.Listen == "" {
			o.Listen = DefaultListen
		}
		if o.StoreDir == "" {
			errs = append(errs, errors.New("fleet: no store folder for the embedded server's JetStream"))
		}
		if len(o.Routes) > 0 && o.Cluster == "" {
			errs = append(errs, errors.New("fleet: routes without a cluster address"))
		}
	} else if o.Cluster != "" || len(o.Routes) > 0 || o.RouteTLS != nil || o.StoreDir != "" {
		errs = append(errs, errors.New("fleet: a URL and an embedded server's settings (cluster, routes, route TLS, store folder) together"))
	}
	if o.MaxStore <= 0 {
		o.MaxStore = DefaultMaxStore
	}
	if o.Replicas < 0 || o.Replicas > 5 {
		errs = append(errs, fmt.Errorf("fleet: replicas %d: must be from 1 to 5, or 0 to choose", o.Replicas))
	}
	if o.Replicas == 0 {
		o.Replicas = 3
		if o.URL == "" && o.Cluster == "" {
			o.Replicas = 1
		}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.AttemptTimeout <= 0 {
		o.AttemptTimeout = DefaultAttemptTimeout
	}
	if o.EventsMaxAge <= 0 {
		o.EventsMaxAge = DefaultEventsMaxAge
	}
	if o.EventsMaxBytes <= 0 {
		o.EventsMaxBytes = DefaultEventsMaxBytes
	}
	if need := int64(len(bucketSpecs))*BucketMaxBytes + o.EventsMaxBytes; o.URL == "" && need > o.MaxStore {
		errs = append(errs, fmt.Errorf("fleet: the buckets and the events stream reserve %d MiB, more than the store's %d MiB", need>>20, o.MaxStore>>20))
	}
	if o.EventsDuplicates <= 0 {
		o.EventsDuplicates = DefaultDuplicates
	}
	return o, errors.Join(errs...)
}

// ClientPassword is ClientUser's password on the embedded server: derived
// from the secret (HMAC-SHA256), so the secret itself never travels, and a
// client password that leaks does not open the routes.
func ClientPassword(secret string) string { return derive(secret, "blueline fleet client v1") }

// RoutePassword is RouteUser's password, which every route presents (it is
// put in the route URLs) and every node checks.
func RoutePassword(secret string) string { return derive(secret, "blueline fleet route v1") }

func derive(secret, purpose string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(purpose))
	return hex.EncodeToString(m.Sum(nil))
}
