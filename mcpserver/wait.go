package mcpserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/handle"
)

// ErrShuttingDown ends the waits in progress when Blueline shuts down.
var ErrShuttingDown = errors.New("Blueline is shutting down")

// waitCursor is where a wait starts, opaque to agents: after an event of
// the stream (After), or at a time (Since, Unix ms) skipping the messages
// a read already showed (Seen).
type waitCursor struct {
	After uint64   `json:"a,omitempty"`
	Since int64    `json:"s,omitempty"`
	Seen  []string `json:"m,omitempty"`
}

func (c waitCursor) String() string {
	data, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(data)
}

func parseCursor(s string) (waitCursor, error) {
	var c waitCursor
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || json.Unmarshal(data, &c) != nil || (c.After == 0 && c.Since <= 0) {
		return waitCursor{}, errors.New("cursor is not one that wait_for_message or read_messages returned")
	}
	return c, nil
}

// seenSlack is how far before a read's start a message shown by it may
// still be recorded as arriving after it (clocks, commit order).
const seenSlack = 5 * time.Second

// readCursor is the wait cursor of a read that started at start and showed
// msgs: from the start, skipping the contacts' messages it showed that are
// recent enough to be among the stream's events after it.
func readCursor(start time.Time, msgs []api.Message) string {
	c := waitCursor{Since: start.UnixMilli()}
	for _, m := range msgs {
		if !m.IsFromMe && m.SyncedAt >= start.Add(-seenSlack).UnixMilli() {
			c.Seen = append(c.Seen, m.ID)
		}
	}
	return c.String()
}

// noWaitGrace bounds a wait with timeout_seconds 0, which reads what the
// stream already holds after its cursor: the stream does not say when it
// has sent all of that, so the read ends at the first event newer than the
// call, or after this long. A message it misses is not lost: the cursor
// it answers is before it.
const noWaitGrace = 2 * time.Second

func (t *tools) wait(ctx context.Context, req *mcp.CallToolRequest, in WaitInput) (*mcp.CallToolResult, WaitOutput, error) {
	return t.waitFor(ctx, req, in, waitKind{tool: "wait_for_message", event: api.EventMessageReceived})
}

// waitKind is what a wait tool waits for: the messages of one event.
type waitKind struct {
	tool  string // the tool, named in the errors that tell to call it again
	event string
}

// waitFor waits for the next message of kind's event after in's cursor.
func (t *tools) waitFor(ctx context.Context, req *mcp.CallToolRequest, in WaitInput, kind waitKind) (*mcp.CallToolResult, WaitOutput, error) {
	seconds := DefaultWaitSeconds // null (absent is the schema's default)
	if in.TimeoutSeconds != nil {
		seconds = *in.TimeoutSeconds // in its bounds (checkBounds)
	}
	timeout, now := time.Duration(seconds)*time.Second, t.opts.Now()
	if seconds == 0 {
		timeout = noWaitGrace
	}
	start := waitCursor{Since: now.UnixMilli()}
	if in.Cursor != "" {
		var err error
		if start, err = parseCursor(in.Cursor); err != nil {
			return nil, WaitOutput{}, err
		}
	}
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, WaitOutput{}, err
	}
	// The chat, checked (line, access, existence) and resolved to its ID
	// before waiting; a contact who never wrote has none yet.
	var chatID, contact string
	if in.Chat != "" {
		if chatID, err = t.chatID(ctx, c, in.Line, in.Chat); err != nil {
			return nil, WaitOutput{}, apiError(err)
		}
		if chatID == "" {
			contact, _ = handle.Normalize(in.Chat)
		}
	}
	if seconds == 0 && in.Cursor == "" {
		// Nothing can have come after a wait that starts now.
		return nil, WaitOutput{TimedOut: true, Cursor: start.String()}, nil
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if t.opts.Done != nil {
		go func() {
			select {
			case <-t.opts.Done:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	// Live messages of known senders only, unless asked for more, whatever
	// the key: what wakes an agent.
	params := client.EventStreamParams{Events: []string{kind.event}, Lines: []string{in.Line},
		Arrival: []string{api.ArrivalLive}, IncludeFiltered: &in.IncludeFiltered}
	if in.IncludeCatchUp {
		params.Arrival = append(params.Arrival, api.ArrivalCatchUp)
	}
	if start.After > 0 {
		params.After = start.After
	} else {
		params.Since = time.UnixMilli(start.Since)
	}
	if seconds > 0 {
		t.progress(ctx, req, timeout)
	}
	next := start
	for ev, err := range c.Events.Stream(ctx, params) {
		if err != nil {
			if _, ok := errors.AsType[*client.Error](err); ok {
				return nil, WaitOutput{}, apiError(err)
			}
			if t.done() {
				break
			}
			// The stream broke (the daemon went away): say so rather
			// than time out as if nothing came.
			return nil, WaitOutput{}, fmt.Errorf("%w; call %s again with cursor %q once Blueline answers", err, kind.tool, next.String())
		}
		if seconds == 0 && ev.Timestamp > now.UnixMilli() {
			break // newer than the call: all that was there has been read
		}
		next = waitCursor{After: ev.Seq}
		var m api.MessageEventData
		if err := json.Unmarshal(ev.Data, &m); err != nil || m.IsFromMe && kind.event != api.EventMessageSelf || slices.Contains(start.Seen, m.ID) {
			continue
		}
		if in.Chat != "" && m.ChatID != chatID {
			if chatID != "" || !t.contactsChat(ctx, c, in.Line, in.Chat, contact, m) {
				continue
			}
			chatID = m.ChatID
		}
		msg := messageOf(m.Message)
		if kind.event == api.EventMessageSelf {
			// The owner's own words, whichever copy of them Messages kept.
			msg.Untrusted = false
		}
		out := WaitOutput{Message: &msg, Arrival: m.Arrival, Cursor: next.String()}
		return untrusted(out), out, nil
	}
	if t.done() {
		return nil, WaitOutput{}, fmt.Errorf("%w; call %s again with cursor %q once it is back", ErrShuttingDown, kind.tool, next.String())
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, WaitOutput{}, err
	}
	return nil, WaitOutput{TimedOut: true, Cursor: next.String()}, nil
}

func (t *tools) done() bool {
	if t.opts.Done == nil {
		return false
	}
	select {
	case <-t.opts.Done:
		return true
	default:
		return false
	}
}

// chatID resolves a chat (a cht_ ID, a handle or a group's identifier) to
// its ID, checking that the key may read it; "" when a contact has no chat
// with the line yet.
func (t *tools) chatID(ctx context.Context, c *client.Client, line, chat string) (string, error) {
	page, err := c.Messages.ListPage(ctx, client.MessageListParams{From: line, To: chat, Limit: 1})
	if err != nil {
		return "", err
	}
	if strings.HasPrefix(chat, "cht_") {
		return chat, nil
	}
	if len(page.Data) > 0 {
		return page.Data[0].ChatID, nil
	}
	return "", nil
}

// contactsChat reports whether m opened the chat of a contact who had none
// when the wait started: m is from them, and the chat the API now finds
// for them is m's (not a group they are in).
func (t *tools) contactsChat(ctx context.Context, c *client.Client, line, chat, contact string, m api.MessageEventData) bool {
	if contact == "" {
		return false
	}
	if sender, _ := handle.Normalize(m.Sender); sender != contact {
		return false
	}
	id, err := t.chatID(ctx, c, line, chat)
	return err == nil && id == m.ChatID
}

// progressEvery is how often a wait tells a client that asked for progress
// (a progress token) that it is still waiting: clients that reset their
// request timeout on progress then let long waits run, and proxies see the
// answer alive.
const progressEvery = 15 * time.Second

// progress reports the wait's progress, now and every progressEvery,
// until ctx ends, when the call asked for it.
func (t *tools) progress(ctx context.Context, req *mcp.CallToolRequest, timeout time.Duration) {
	if req == nil || req.Session == nil || req.Params == nil || req.Params.GetProgressToken() == nil {
		return
	}
	token, start := req.Params.GetProgressToken(), time.Now()
	notify := func() {
		waited := time.Since(start)
		req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token,
			Message: "waiting for a message", Progress: waited.Seconds(), Total: timeout.Seconds()})
	}
	notify()
	go func() {
		tick := time.NewTicker(progressEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				notify()
			}
		}
	}()
}
