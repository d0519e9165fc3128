package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"time"
)

// drainResult is how the delivery worker kept up with the accepted writes:
// a 201 means "durably queued", and the outbox is sent afterwards.
type drainResult struct {
	items      int           // 201s of the daemon's POST load
	took       time.Duration // from the end of the load until the last was done
	done       bool          // the last accepted item left the queue within the limit
	lastStatus string
	delivered  int // when not done: how many had left the queue (estimate)
	err        string
}

// waitDrain waits up to limit for the last accepted outbox item to be sent
// (or failed). The worker claims items oldest first, so when it is done
// the whole backlog is.
func waitDrain(ctx context.Context, c *apiClient, items []accepted, limit time.Duration) drainResult {
	defer c.close()
	r := drainResult{items: len(items)}
	if len(items) == 0 {
		return r
	}
	status := func(id string) (string, error) {
		code, body, _, err := c.do(ctx, http.MethodGet, "/v1/outbox?"+url.Values{"id": {id}}.Encode(), nil)
		if err != nil {
			return "", err
		}
		if code != http.StatusOK {
			return "", fmt.Errorf("GET /v1/outbox: HTTP %d: %.300s", code, body)
		}
		var item struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(body, &item); err != nil {
			return "", fmt.Errorf("decode outbox item: %w", err)
		}
		return item.Status, nil
	}
	finished := func(s string) bool { return s == "sent" || s == "failed" }

	slog.Info("waiting for the delivery worker to send the backlog", "items", len(items), "limit", limit)
	start := time.Now()
	last := items[len(items)-1].id
	for {
		s, err := status(last)
		if err != nil {
			r.err = err.Error()
			return r
		}
		r.lastStatus = s
		if finished(s) {
			r.done, r.took, r.delivered = true, time.Since(start), len(items)
			slog.Info("backlog sent", "items", len(items), "took", r.took.Round(time.Millisecond))
			return r
		}
		if time.Since(start) > limit || ctx.Err() != nil {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.took = time.Since(start)
	// Items leave the queue in about the order they were accepted, so a
	// binary search for the first one still queued estimates the progress.
	r.delivered = sort.Search(len(items), func(i int) bool {
		s, err := status(items[i].id)
		return err != nil || !finished(s)
	})
	return r
}
