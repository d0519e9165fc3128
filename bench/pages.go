package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"time"
)

const pageSize = 50

type pageStats struct {
	name      string
	size      int             // messages seeded in the chat
	first     []time.Duration // first-page requests, sorted
	walk      []time.Duration // pages reached by walking next_cursor, sorted
	minDepth  int             // messages above the shallowest measured walk page
	maxDepth  int             // and above the deepest one
	restarts  int             // walks that reached the end and began again at the top
	walkedAll int             // messages counted by a walk from top to end; 0 if none ended
	failed    int
	firstErr  string
	anomalies []string // short pages, order violations: signs the listing is wrong
}

type page struct {
	Data []struct {
		ID     string `json:"id"`
		SentAt int64  `json:"sent_at"`
	} `json:"data"`
	HasMore    bool    `json:"has_more"`
	NextCursor *string `json:"next_cursor"`
}

// measurePages times n sequential GET /v1/messages requests on the chat with
// contact, alternating the first page with the next page of a walk through
// the history. The walk first skips, unmeasured, to the middle of the
// history, so the measured pages are deep ones even when n pages are a
// small part of the chat.
func measurePages(ctx context.Context, c *apiClient, contact string, size, n int) (pageStats, error) {
	defer c.close()
	ps := pageStats{size: size, minDepth: -1}
	get := func(cursor *string, limit int) (page, time.Duration, error) {
		q := url.Values{"from": {lineHandle}, "to": {contact}, "limit": {fmt.Sprint(limit)}}
		if cursor != nil {
			q.Set("cursor", *cursor)
		}
		status, body, took, err := c.do(ctx, http.MethodGet, "/v1/messages?"+q.Encode(), nil)
		if err != nil {
			return page{}, took, err
		}
		if status != http.StatusOK {
			return page{}, took, fmt.Errorf("HTTP %d: %.300s", status, body)
		}
		var p page
		if err := json.Unmarshal(body, &p); err != nil {
			return page{}, took, fmt.Errorf("decode page: %w", err)
		}
		return p, took, nil
	}
	anomaly := func(format string, args ...any) {
		if len(ps.anomalies) < 5 {
			ps.anomalies = append(ps.anomalies, fmt.Sprintf(format, args...))
		}
	}

	// The walk's position: its cursor, how many messages lie above it and
	// the sent_at of the last message seen, which the next must not exceed.
	var cursor *string
	depth := 0
	lastSent := int64(1<<63 - 1)
	advance := func(p page, limit int) {
		for _, m := range p.Data {
			if m.SentAt > lastSent {
				anomaly("message %s at depth %d is newer than the one above it", m.ID, depth)
			}
			lastSent = m.SentAt
			depth++
		}
		if p.HasMore && len(p.Data) != limit {
			anomaly("page at depth %d has %d messages and has_more", depth, len(p.Data))
		}
		if p.HasMore != (p.NextCursor != nil) {
			anomaly("has_more is %v but next_cursor is %v", p.HasMore, p.NextCursor)
		}
		cursor = p.NextCursor
		if cursor == nil {
			if ps.walkedAll == 0 {
				ps.walkedAll = depth
			}
			if depth != size {
				anomaly("a walk from the top ended after %d messages, want %d", depth, size)
			}
			ps.restarts++
			depth, lastSent = 0, int64(1<<63-1)
		}
	}

	skipStart := time.Now()
	for steps := 0; depth < size/2 && steps <= size/100+1; steps++ {
		if time.Since(skipStart) > 2*time.Minute {
			slog.Warn("stopped skipping ahead: too slow", "depth", depth)
			break
		}
		p, _, err := get(cursor, 100)
		if err != nil {
			return ps, fmt.Errorf("skip ahead in the %d-message chat: %w", size, err)
		}
		advance(p, 100)
	}
	// Skipping ahead counts toward no statistic but may have ended a walk
	// (a chat of under 100 messages); only measured walks count restarts.
	ps.restarts = 0
	slog.Info("GET pages", "chat_messages", size, "requests", n, "walk_starts_at", depth,
		"skip_took", time.Since(skipStart).Round(time.Millisecond))

	for i := range n {
		if ctx.Err() != nil {
			return ps, ctx.Err()
		}
		walking := i%2 == 1
		var (
			p    page
			took time.Duration
			err  error
		)
		if walking {
			at := depth
			p, took, err = get(cursor, pageSize)
			if err == nil {
				ps.walk = append(ps.walk, took)
				if ps.minDepth < 0 || at < ps.minDepth {
					ps.minDepth = at
				}
				ps.maxDepth = max(ps.maxDepth, at)
				advance(p, pageSize)
			}
		} else {
			p, took, err = get(nil, pageSize)
			if err == nil {
				ps.first = append(ps.first, took)
				if want := min(size, pageSize); len(p.Data) < want {
					anomaly("first page has %d messages, want %d", len(p.Data), want)
				}
			}
		}
		if err != nil {
			ps.failed++
			if ps.firstErr == "" {
				ps.firstErr = err.Error()
			}
			if ps.failed > 20 {
				return ps, fmt.Errorf("GET on the %d-message chat keeps failing: %s", size, ps.firstErr)
			}
		}
	}
	slices.Sort(ps.first)
	slices.Sort(ps.walk)
	slog.Info("GET pages done", "chat_messages", size, "first_p50", pct(ps.first, 0.5), "walk_p50", pct(ps.walk, 0.5))
	return ps, nil
}
