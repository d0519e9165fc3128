package fleet

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// NodeEntry is a node's heartbeat (bucket "nodes", keyed by node name):
// what it runs and serves, as it last said.
type NodeEntry struct {
	Node      string    `json:"node"`
	Version   string    `json:"version"`
	BaseURL   string    `json:"base_url"` // the node's public API URL
	Lines     []string  `json:"lines"`    // the handles it serves
	StartedAt time.Time `json:"started_at"`
	UpdatedAt time.Time `json:"updated_at"` // by the node's clock
}

// Beat writes this node's heartbeat, stamped with its name and now. Only
// the node writes its own key, so a blind Put is enough.
func (n *Node) Beat(ctx context.Context, e NodeEntry, now time.Time) error {
	b, err := Open[NodeEntry](n, BucketNodes)
	if err != nil {
		return err
	}
	e.Node, e.UpdatedAt = n.opts.Node, now.UTC()
	_, err = b.Put(ctx, e.Node, e)
	return err
}

// Nodes are the heartbeats of every node that ever beat, by name.
func (n *Node) Nodes(ctx context.Context) ([]NodeEntry, error) {
	b, err := Open[NodeEntry](n, BucketNodes)
	if err != nil {
		return nil, err
	}
	keys, err := b.Keys(ctx)
	if err != nil {
		return nil, err
	}
	var out []NodeEntry
	for _, k := range keys {
		e, err := b.Get(ctx, k)
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, e.Value)
	}
	slices.SortFunc(out, func(a, b NodeEntry) int { return strings.Compare(a.Node, b.Node) })
	return out, nil
}

// AssetStatus is one JetStream asset (the events stream, a bucket) as its
// group's leader reports it.
type AssetStatus struct {
	Name     string `json:"name"`
	Messages uint64 `json:"messages"`
	Bytes    uint64 `json:"bytes"`
	Replicas int    `json:"replicas"`
	// Leader is the node leading the asset's group; "" standalone, or
	// while no leader is elected.
	Leader string `json:"leader"`
	// Current is how many of its replicas are up to date, the leader
	// included.
	Current int `json:"current"`
}

// ConsumerStatus is a webhook's durable consumer: how far behind it is.
type ConsumerStatus struct {
	Name string `json:"name"`
	// Pending is how many events of its filter it has not yet been given;
	// AckPending how many it was given and has not acknowledged (being
	// delivered, or waiting for a retry).
	Pending     uint64 `json:"pending"`
	AckPending  int    `json:"ack_pending"`
	Redelivered int    `json:"redelivered"`
}

// Status is what `blueline fleet status` shows of JetStream.
type Status struct {
	Stream    AssetStatus      `json:"stream"`
	Buckets   []AssetStatus    `json:"buckets"`
	Consumers []ConsumerStatus `json:"consumers"`
}

// Status reads the events stream's, the buckets' and the consumers' state.
func (n *Node) Status(ctx context.Context) (Status, error) {
	var st Status
	info, err := n.events.Info(ctx)
	if err != nil {
		return st, err
	}
	st.Stream = assetStatus(info)
	for _, b := range bucketSpecs {
		s, err := n.js.Stream(ctx, "KV_"+n.opts.Prefix+"_"+b.name)
		if err != nil {
			return st, err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return st, err
		}
		a := assetStatus(info)
		a.Name = b.name
		st.Buckets = append(st.Buckets, a)
	}
	names := n.events.ConsumerNames(ctx)
	for name := range names.Name() {
		c, err := n.ConsumerInfo(ctx, name)
		if err != nil {
			return st, err
		}
		st.Consumers = append(st.Consumers, ConsumerStatus{Name: name, Pending: c.NumPending, AckPending: c.NumAckPending, Redelivered: c.NumRedelivered})
	}
	if err := names.Err(); err != nil {
		return st, err
	}
	slices.SortFunc(st.Consumers, func(a, b ConsumerStatus) int { return strings.Compare(a.Name, b.Name) })
	return st, nil
}

func assetStatus(info *jetstream.StreamInfo) AssetStatus {
	a := AssetStatus{Name: info.Config.Name, Messages: info.State.Msgs, Bytes: info.State.Bytes, Replicas: info.Config.Replicas, Current: 1}
	if c := info.Cluster; c != nil {
		a.Leader, a.Current = c.Leader, 0
		if c.Leader != "" {
			a.Current = 1
		}
		for _, r := range c.Replicas {
			if r.Current {
				a.Current++
			}
		}
	}
	return a
}
