// Package delivery moves accepted writes out through the network and records
// what the network delivers in. Outbound, an outbox item goes pending →
// claimed → sent or failed; transient failures go back to pending with a
// backoff until max_attempts. Inbound, messages are stored with their chats.
package delivery

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/storage"
)

// Options tune the worker.
type Options struct {
	Workers   int           // concurrent sends
	RetryBase time.Duration // delay before the first retry, doubled for each further one
	RetryMax  time.Duration // longest delay between attempts
	// SendTimeout bounds one attempt; a bridge that hangs longer is retried,
	// unless it had handed the message over (see bridge.Outgoing.Handoff).
	// The Messages bridge keeps its own, shorter deadlines.
	SendTimeout time.Duration
	// Metrics counts attempts and times the bridges; nil counts nothing.
	Metrics Metrics
	// Pace spaces the messages of the lines it names (by line ID): at most
	// one per pace is handed to the network (the Apple ID guard's pace).
	Pace map[string]time.Duration
	// Clock is the dispatcher's and the pacer's time; nil is the real one.
	Clock Clock
}

// Metrics counts what the worker does.
type Metrics interface {
	// OutboxSend counts an attempt's outcome: "sent", "retried" or "failed".
	OutboxSend(outcome string)
	// BridgeSend records how long a bridge ("sim", "messages") took over
	// one action.
	BridgeSend(bridge string, d time.Duration)
	LatencyRecorder
}

// LatencyRecorder times a stage of a line's traffic: "accept_to_sent"
// (the worker) or "sent_to_delivered" (the Receiver).
type LatencyRecorder interface {
	Latency(lineID, stage string, d time.Duration)
}

// Worker delivers the outbox. Start it with Run.
type Worker struct {
	db      *storage.DB
	bridges map[string]bridge.Bridge // by line ID
	files   FileLocator
	opts    Options
	log     *slog.Logger
	clock   Clock
	pacer   *Pacer
}

// FileLocator finds an uploaded file's blob on disk.
type FileLocator interface {
	Path(id string) string
}

// NewWorker returns a worker sending each line's items through its bridge.
func NewWorker(db *storage.DB, bridges map[string]bridge.Bridge, files FileLocator, opts Options, log *slog.Logger) *Worker {
	if opts.Workers < 1 {
		opts.Workers = 1
	}
	if opts.SendTimeout == 0 {
		opts.SendTimeout = 10 * time.Minute
	}
	if opts.Clock == nil {
		opts.Clock = realClock{}
	}
	return &Worker{db: db, bridges: bridges, files: files, opts: opts, log: log, clock: opts.Clock,
		pacer: NewPacer(opts.Clock, opts.Pace)}
}

// Run delivers until ctx is cancelled, then waits for the sends under way.
// Items left claimed by a previous run are made due again first.
//
// One dispatcher claims due items in batches and hands each to a worker
// chosen by its chat, so a chat's messages are sent one at a time in the
// order they were accepted (a retried send can still fall behind later
// ones), while different chats send in parallel.
func (w *Worker) Run(ctx context.Context) error {
	if n, err := w.db.RecoverClaimed(ctx); err != nil {
		return fmt.Errorf("recover claimed outbox items: %w", err)
	} else if n > 0 {
		w.log.Info("outbox items claimed before the last stop are due again", "count", n)
	}

	var wg sync.WaitGroup
	defer wg.Wait()
	// At most capacity items are claimed and not yet done; each done item
	// reports on finished, which has room for all of them.
	capacity := w.opts.Workers * queueDepth
	finished := make(chan struct{}, capacity)
	shards := make([]chan storage.OutboxItem, w.opts.Workers)
	for i := range shards {
		shards[i] = make(chan storage.OutboxItem, queueDepth)
		wg.Go(func() { w.work(ctx, shards[i], finished) })
	}
	defer func() {
		for _, sh := range shards {
			close(sh)
		}
	}()

	inflight := 0
	for {
		nextDue := int64(0)
		if free := capacity - inflight; free > 0 {
			now := w.clock.Now().UnixMilli()
			items, next, err := w.db.ClaimDuePaced(ctx, now, min(free, maxClaim), w.pacer)
			if err != nil {
				w.log.Error("claim outbox items", "err", err)
				next = now + time.Second.Milliseconds()
			}
			w.pacer.Claimed(items, now)
			nextDue = next
			for _, item := range items {
				inflight++
				shards[shardOf(item.ChatID, len(shards))] <- item
			}
			if len(items) == min(free, maxClaim) {
				continue // more may be due right now
			}
		}
		wait := time.Hour
		if nextDue > 0 {
			wait = max(time.UnixMilli(nextDue).Sub(w.clock.Now()), 0)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-w.db.OutboxReady():
		case <-w.clock.After(wait):
		case <-finished:
			inflight--
		}
		for drained := false; !drained; {
			select {
			case <-finished:
				inflight--
			default:
				drained = true
			}
		}
	}
}

const (
	queueDepth = 16  // claimed items waiting per worker
	maxClaim   = 256 // items claimed in one transaction
)

func shardOf(chatID string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(chatID))
	return int(h.Sum32() % uint32(n))
}

// work sends the items of one shard in order. While items are queued it
// keeps sending for up to recordWindow before recording the successes in one
// transaction, so that a busy chat is not held to one commit per message.
func (w *Worker) work(ctx context.Context, queue <-chan storage.OutboxItem, finished chan<- struct{}) {
	for item := range queue {
		var sent []storage.Sent
		var timed []timedSend // the same items, to time once recorded
		taken := 0
		start := time.Now()
		for more := true; more; {
			taken++
			// Once stopping, leave items claimed: the next start makes them
			// due again.
			if ctx.Err() == nil {
				if s, ok := w.attempt(ctx, item); ok {
					sent = append(sent, s)
					timed = append(timed, timedSend{item, w.clock.Now()})
				}
			}
			more = false
			if time.Since(start) < recordWindow {
				select {
				case item, more = <-queue:
				default:
				}
			}
		}
		if len(sent) > 0 {
			// The network has these messages: if recording fails, failing
			// the items would invite duplicate sends, so only log.
			if err := w.db.MarkSent(context.WithoutCancel(ctx), sent...); err != nil {
				w.log.Error("record sent messages", "count", len(sent), "err", err)
			}
			// Timed once recorded, so that an item read as sent is counted.
			for _, ts := range timed {
				w.timeSent(ts.item, ts.at)
			}
		}
		for range taken {
			finished <- struct{}{}
		}
	}
}

// recordWindow bounds how long successful sends wait to be recorded.
const recordWindow = 20 * time.Millisecond

// attempt makes one attempt at an item. A success is returned for the
// caller to record; a failure is recorded here. If the worker stops during
// the send, the item stays claimed and the next start makes it due again.
func (w *Worker) attempt(runCtx context.Context, item storage.OutboxItem) (storage.Sent, bool) {
	log := w.log.With("outbox_id", item.ID, "attempt", item.Attempts)
	sent, sendErr := w.send(runCtx, item)
	ctx := context.WithoutCancel(runCtx)
	var err error
	switch {
	case sendErr == nil:
		w.count("sent")
		return sent, true
	case runCtx.Err() != nil:
		log.Info("stopped during a send; the item is retried at the next start")
		return sent, false
	case isUnavailable(sendErr):
		after, _ := bridge.IsUnavailable(sendErr)
		log.Info("the network does not work now; the item waits", "err", sendErr, "in", after)
		err = w.db.MarkWaiting(ctx, item.ID, sendErr.Error(), w.clock.Now().Add(after).UnixMilli())
	case bridge.IsPermanent(sendErr) || item.Attempts >= item.MaxAttempts:
		log.Warn("outbox item failed", "err", sendErr)
		w.count("failed")
		_, err = w.db.MarkFailed(ctx, item.ID, sendErr.Error())
	default:
		delay := w.backoff(item.Attempts)
		log.Info("send failed; will retry", "err", sendErr, "in", delay)
		w.count("retried")
		err = w.db.MarkRetry(ctx, item.ID, sendErr.Error(), w.clock.Now().Add(delay).UnixMilli())
	}
	if err != nil {
		log.Error("record delivery outcome", "err", err)
	}
	return sent, false
}

// timedSend is an item the network reported sent at at.
type timedSend struct {
	item storage.OutboxItem
	at   time.Time
}

// timeSent records how long a message took from its acceptance, or its
// scheduled time, to the network reporting it sent (retries and waits
// included). Reactions, typing and the like are not messages: not timed.
func (w *Worker) timeSent(item storage.OutboxItem, at time.Time) {
	if w.opts.Metrics == nil || (item.Kind != storage.KindMessage && item.Kind != storage.KindGroupCreate) {
		return
	}
	from := time.UnixMilli(max(item.CreatedAt, item.SendAt))
	w.opts.Metrics.Latency(item.LineID, "accept_to_sent", at.Sub(from))
}

// isUnavailable reports whether err is the network known not to work
// now, before anything was tried.
func isUnavailable(err error) bool {
	_, ok := bridge.IsUnavailable(err)
	return ok
}

func (w *Worker) count(outcome string) {
	if w.opts.Metrics != nil {
		w.opts.Metrics.OutboxSend(outcome)
	}
}

// send delivers an item through its line's bridge and returns what to
// record for it.
func (w *Worker) send(ctx context.Context, item storage.OutboxItem) (_ storage.Sent, err error) {
	line, ok := w.db.LineByID(item.LineID)
	if !ok {
		return storage.Sent{}, bridge.Permanent(fmt.Errorf("line %s is no longer configured", item.LineID))
	}
	b := w.bridges[item.LineID]
	if b == nil {
		return storage.Sent{}, bridge.Permanent(fmt.Errorf("line %s has no bridge", line.Handle))
	}
	var chat storage.Chat
	if item.Kind != storage.KindGroupCreate { // the group does not exist yet
		if chat, err = w.db.ChatByID(ctx, item.ChatID); err != nil {
			return storage.Sent{}, bridge.Permanent(fmt.Errorf("chat %s: %w", item.ChatID, err))
		}
	}
	conv := bridge.Conversation{
		OutboxID: item.ID,
		Line:     line.Handle,
		Service:  chat.Service,
		Chat:     bridge.Chat{GUID: chat.GUID, Identifier: chat.Identifier, IsGroup: chat.IsGroup, Name: chat.Name, Participants: chat.Participants},
	}
	// The line's pace: its turn is taken before the send's time starts.
	if err := w.pacer.Wait(ctx, item); err != nil {
		return storage.Sent{}, err
	}
	sendCtx, cancel := context.WithTimeout(ctx, w.opts.SendTimeout)
	defer cancel()
	// handed is set once the bridge may have handed the message over: from
	// then on only an error it marks NotSent may lead to another attempt.
	// An error the bridge made permanent already says what happened.
	var handed atomic.Bool
	defer func() {
		if err != nil && handed.Load() && !bridge.IsNotSent(err) && !bridge.IsPermanent(err) && ctx.Err() == nil {
			err = bridge.Permanent(fmt.Errorf("outcome unknown, not retried to avoid a duplicate: %w", err))
		}
	}()
	var sent storage.Sent
	if w.opts.Metrics != nil {
		defer func(start time.Time) { w.opts.Metrics.BridgeSend(line.Bridge, time.Since(start)) }(time.Now())
	}
	switch item.Kind {
	case storage.KindMessage:
		sent, err = w.sendMessage(sendCtx, b, conv, line, chat, item, &handed)
	case storage.KindReaction:
		var r bridge.Receipt
		r, err = b.React(sendCtx, bridge.Reaction{Conversation: conv, TargetGUID: item.TargetGUID, Type: item.ReactionType,
			Emoji: item.ReactionEmoji, Remove: item.Remove})
		sent.At = r.SentAt.UnixMilli()
		if r.SentAt.IsZero() {
			sent.At = time.Now().UnixMilli()
		}
	case storage.KindTyping:
		err = b.SetTyping(sendCtx, bridge.Typing{Conversation: conv, On: item.TypingOn})
		sent.At = time.Now().UnixMilli()
	case storage.KindRead:
		err = b.MarkRead(sendCtx, bridge.Read{Conversation: conv})
		sent.At = time.Now().UnixMilli()
	case storage.KindEdit, storage.KindUnsend:
		e, ok := b.(Editor)
		if !ok {
			return storage.Sent{}, bridge.Permanent(fmt.Errorf("line %s cannot edit or unsend messages", line.Handle))
		}
		if item.Kind == storage.KindEdit {
			err = e.Edit(sendCtx, bridge.Edit{Conversation: conv, TargetGUID: item.TargetGUID, Text: *item.Text})
		} else {
			err = e.Unsend(sendCtx, bridge.Unsend{Conversation: conv, TargetGUID: item.TargetGUID})
		}
		sent.At = time.Now().UnixMilli()
	case storage.KindGroupCreate, storage.KindGroupChange:
		g, ok := b.(GroupManager)
		if !ok {
			return storage.Sent{}, bridge.Permanent(fmt.Errorf("line %s cannot manage group chats", line.Handle))
		}
		if item.Kind == storage.KindGroupCreate {
			sent, err = w.createGroup(sendCtx, g, line, item, &handed)
		} else {
			err = g.ChangeGroup(sendCtx, bridge.GroupChange{Conversation: conv, Action: item.GroupAction, Participant: item.Participant, Name: item.GroupName})
			sent.At = time.Now().UnixMilli()
		}
	default:
		err = bridge.Permanent(fmt.Errorf("unknown outbox item kind %q", item.Kind))
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil && !bridge.IsPermanent(err) {
			return storage.Sent{}, fmt.Errorf("the network did not answer within %s: %w", w.opts.SendTimeout, err)
		}
		return storage.Sent{}, err
	}
	sent.OutboxID = item.ID
	return sent, nil
}

// Editor is a bridge that can edit and unsend the line's messages. What the
// network records comes back through the bridge's sink.
type Editor interface {
	Edit(ctx context.Context, e bridge.Edit) error
	Unsend(ctx context.Context, u bridge.Unsend) error
}

// GroupManager is a bridge that can create and change group chats. A
// change comes back through the bridge's sink as a chat update.
type GroupManager interface {
	CreateGroup(ctx context.Context, g bridge.NewGroup) (bridge.Chat, bridge.Receipt, error)
	ChangeGroup(ctx context.Context, c bridge.GroupChange) error
}

// createGroup creates a group with its first message and returns the chat
// and message to store.
func (w *Worker) createGroup(ctx context.Context, g GroupManager, line storage.Line, item storage.OutboxItem, handed *atomic.Bool) (storage.Sent, error) {
	service := line.Service
	ng := bridge.NewGroup{OutboxID: item.ID, Line: line.Handle, Service: service, Participants: item.Participants, Name: item.GroupName,
		Handoff: w.handoff(item.ID, handed)}
	if item.Text != nil {
		ng.Text = *item.Text
	}
	if item.HandedAt != 0 {
		ng.HandedAt = time.UnixMilli(item.HandedAt)
		handed.Store(true)
	}
	chat, receipt, err := g.CreateGroup(ctx, ng)
	if err != nil {
		return storage.Sent{}, err
	}
	now := time.Now()
	if receipt.SentAt.IsZero() {
		receipt.SentAt = now
	}
	return storage.Sent{ChatGUID: receipt.ChatGUID, Service: receipt.Service,
		Chat: storage.Chat{ID: storage.NewID("cht_"), GUID: chat.GUID, Identifier: chat.Identifier, Service: cmp.Or(receipt.Service, service),
			Name: chat.Name, Participants: chat.Participants},
		Message: storage.Message{
			ID:       storage.NewID("msg_"),
			GUID:     receipt.GUID,
			Sender:   line.Handle,
			Text:     item.Text,
			Service:  cmp.Or(receipt.Service, service),
			IsFromMe: true,
			SentAt:   receipt.SentAt.UnixMilli(),
			SyncedAt: now.UnixMilli(),
		}}, nil
}

// handoff is a bridge's Handoff for item: durable before anything may reach
// the network, so that after a crash the item is looked for, never sent
// again.
func (w *Worker) handoff(id string, handed *atomic.Bool) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := w.db.MarkHanded(ctx, id); err != nil {
			return fmt.Errorf("record the hand-off: %w", err)
		}
		handed.Store(true)
		return nil
	}
}

// sendMessage sends a text, attachment or voice memo and returns the message
// to store for it.
func (w *Worker) sendMessage(ctx context.Context, b bridge.Bridge, conv bridge.Conversation, line storage.Line, chat storage.Chat, item storage.OutboxItem, handed *atomic.Bool) (storage.Sent, error) {
	out := bridge.Outgoing{Conversation: conv, ReplyToGUID: item.ReplyToGUID, IsAudioMessage: item.IsAudioMessage,
		Handoff: func(ctx context.Context) error {
			// Durable before the hand-off: after a crash the item is then
			// looked for, never sent again.
			if err := w.db.MarkHanded(ctx, item.ID); err != nil {
				return fmt.Errorf("record the hand-off: %w", err)
			}
			handed.Store(true)
			return nil
		}}
	if item.HandedAt != 0 {
		out.HandedAt = time.UnixMilli(item.HandedAt)
		handed.Store(true)
	}
	if item.Text != nil {
		out.Text = *item.Text
	}
	attachments := []storage.Attachment{}
	for _, id := range item.FileIDs {
		f, err := w.db.FileByID(ctx, id)
		if err != nil {
			return storage.Sent{}, bridge.Permanent(fmt.Errorf("attachment %s: %w", id, err))
		}
		out.Attachment = &bridge.File{Path: w.files.Path(id), Filename: f.Filename, MimeType: f.MimeType, Size: f.Size}
		attachments = append(attachments, storage.Attachment{FileID: id, Filename: f.Filename, MimeType: f.MimeType, Size: f.Size})
	}
	receipt, err := b.Send(ctx, out)
	if err != nil {
		return storage.Sent{}, err
	}
	now := time.Now()
	if receipt.SentAt.IsZero() {
		receipt.SentAt = now
	}
	return storage.Sent{ChatGUID: receipt.ChatGUID, Service: receipt.Service, SMSFallback: receipt.SMSFallback, Message: storage.Message{
		ID:             storage.NewID("msg_"),
		GUID:           receipt.GUID,
		Sender:         line.Handle,
		Text:           item.Text,
		Attachments:    attachments,
		Service:        cmp.Or(receipt.Service, chat.Service),
		IsFromMe:       true,
		IsAudioMessage: item.IsAudioMessage,
		SentAt:         receipt.SentAt.UnixMilli(),
		SyncedAt:       now.UnixMilli(),
		ReplyToGUID:    item.ReplyToGUID,
	}}, nil
}

// backoff is the delay after the given failed attempt: RetryBase doubled per
// attempt, capped at RetryMax, with equal jitter so that items failed together
// do not retry together.
func (w *Worker) backoff(attempt int) time.Duration {
	d := w.opts.RetryBase
	for i := 1; i < attempt && d < w.opts.RetryMax; i++ {
		d *= 2
	}
	d = min(d, w.opts.RetryMax)
	half := d / 2
	return half + rand.N(half+1)
}
