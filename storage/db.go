// Package storage keeps all of Blueline's state in one bbolt file. It is the
// only package that imports bbolt: every bucket, index and transaction
// boundary lives here, so that a write and everything it causes (an index, a
// queue entry, later a webhook event) commit together or not at all.
package storage

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Errors callers branch on. They are wrapped with context where returned.
var (
	ErrNotFound  = errors.New("not found")
	ErrBadCursor = errors.New("malformed cursor")
)

// Bucket names. Composite keys are fixed-width IDs and big-endian integers, so
// byte order is the order we page in.
var (
	bktMeta          = []byte("meta")
	bktLines         = []byte("lines")            // handle → Line
	bktKeys          = []byte("keys")             // key ID → Key
	bktKeyHashes     = []byte("key_hashes")       // sha256(secret) → key ID
	bktChats         = []byte("chats")            // chat ID → Chat
	bktChatGUIDs     = []byte("chat_guids")       // line ID ‖ guid → chat ID
	bktChatIdents    = []byte("chat_idents")      // line ID ‖ identifier → chat ID
	bktChatRecent    = []byte("chat_recent")      // line ID ‖ last_message_at ‖ chat ID → nil
	bktChatMessages  = []byte("chat_messages")    // chat ID ‖ sent_at ‖ seq → Message (JSON, or compact history: history.go)
	bktMessages      = []byte("messages")         // message ID → chat_messages key (none for history IDs)
	bktMessageGUIDs  = []byte("message_guids")    // guid → message ID (guidKey → idValue: guids.go)
	bktGUIDJournal   = []byte("guid_journal")     // generation → {guid → message ID}, on its way to message_guids (guids.go)
	bktOutbox        = []byte("outbox")           // outbox ID → OutboxItem
	bktOutboxDue     = []byte("outbox_due")       // next_attempt_at ‖ seq → outbox ID (pending items)
	bktOutboxClaimed = []byte("outbox_claimed")   // outbox ID → nil
	bktIdempotency   = []byte("idempotency")      // key ID ‖ 0 ‖ Idempotency-Key → idempotencyRecord
	bktSandbox       = []byte("sandbox")          // "state" → SandboxState; "quota/<day>" → count
	bktFiles         = []byte("files")            // file ID → File
	bktReactions     = []byte("reactions")        // message ID ‖ sender ‖ 0 ‖ type → Reaction
	bktReceipts      = []byte("receipts")         // chat ID ‖ handle → Receipt
	bktWebhooks      = []byte("webhooks")         // webhook ID → Webhook
	bktWebhookLines  = []byte("webhook_lines")    // line ID ‖ webhook ID → nil
	bktDeliveries    = []byte("deliveries")       // delivery ID → Delivery
	bktDeliveriesDue = []byte("deliveries_due")   // webhook ID ‖ next_attempt_at ‖ seq → delivery ID (pending deliveries)
	bktAttempts      = []byte("attempts")         // at ‖ seq → Attempt
	bktBridgeState   = []byte("bridge_state")     // line ID → bridge position (big-endian int64)
	bktChatUpdates   = []byte("chat_updates")     // line ID ‖ network GUID of a group change → nil
	bktEvents        = []byte("events")           // seq → Event: every event, in commit order (events.go)
	bktConsole       = []byte("console")          // "password" → the console password's slow hash
	bktConsoleLinks  = []byte("console_links")    // sha256(login link token) → loginLink
	bktConsoleSess   = []byte("console_sessions") // sha256(session token) → Session
	bktGuard         = []byte("guard")            // the Apple ID guard's counts (guard.go)
	bktHistoryChats  = []byte("history_chats")    // chat ID → number; number → chat ID: what history IDs name (history.go)
	bktBlocked       = []byte("blocked")          // line ID ‖ 0 ‖ handle → BlockedContact (contacts.go)
	bktOptOuts       = []byte("opt_outs")         // line ID ‖ 0 ‖ handle → OptOut (contacts.go)
	bktHandoffs      = []byte("handoffs")         // chat ID → Handoff: the owner took the chat over (agents.go)
	bktLeases        = []byte("leases")           // chat ID → Lease (agents.go)
	bktApprovals     = []byte("approvals")        // approval_expires_at ‖ outbox ID → line ID: drafts waiting for the owner (approvals.go)
	bktSearchFeed    = []byte("search_feed")      // seq → chat_messages key: messages stored or changed, for the search index (search.go)
)

var allBuckets = [][]byte{
	bktMeta, bktLines, bktKeys, bktKeyHashes, bktChats, bktChatGUIDs, bktChatIdents,
	bktChatRecent, bktChatMessages, bktMessages, bktMessageGUIDs, bktGUIDJournal, bktOutbox,
	bktOutboxDue, bktOutboxClaimed, bktIdempotency, bktSandbox, bktFiles, bktReactions, bktReceipts,
	bktWebhooks, bktWebhookLines, bktDeliveries, bktDeliveriesDue, bktAttempts, bktBridgeState, bktChatUpdates,
	bktEvents, bktConsole, bktConsoleLinks, bktConsoleSess, bktGuard, bktHistoryChats, bktBlocked, bktOptOuts,
	bktHandoffs, bktLeases, bktApprovals, bktSearchFeed,
}

// schemaVersion 2 added compact history records and the compact GUID
// index entries (history.go): a build of schema 1 could not read them. A
// database of schema 1 is read as it is, nothing rewritten.
const schemaVersion = 2

// DB is the daemon's database. Its methods are safe for concurrent use.
type DB struct {
	bolt *bolt.DB
	path string

	mu    sync.RWMutex
	lines []Line // set once by SyncLines, read-only afterwards

	journal journal // the GUID journal's in-memory side (guids.go)
	// importChats are the chats a history import stored last, as stored
	// (historyTx.chat), guarded by journal.mu as imports are.
	importChats map[string]importedChat

	outboxReady   chan struct{}
	webhooksReady chan struct{}
	events        signal
	revocations   signal // keys revoked, console sessions ended (keys.go)
	approvals     signal // drafts started or stopped waiting for approval (approvals.go)
	// imports counts the history imports in progress; importsEnded is
	// told when one ends (Importing).
	imports      atomic.Int32
	importsEnded signal
	typing       typingState
	control      controlFeed // the observer of control records' changes (control.go)
	// fleetDeliveries: webhooks are delivered by the fleet from its events
	// stream, so events queue no local deliveries (fleet.go).
	fleetDeliveries atomic.Bool
}

// Open opens (creating if needed) the database file db.bolt in dir.
// A second process cannot open it while the daemon holds it: bbolt takes an
// exclusive file lock, which Open reports after a short wait.
func Open(dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data folder: %w", err)
	}
	path := filepath.Join(dir, "db.bolt")
	b, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout: 2 * time.Second,
		// The freelist is rebuilt at open instead of written on every commit:
		// fewer pages per commit on the hot path.
		NoFreelistSync: true,
		FreelistType:   bolt.FreelistMapType,
	})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("open %s: the database is locked by another process (is the daemon already running?)", path)
		}
		if _, ok := errors.AsType[*fs.PathError](err); ok {
			return nil, err // "open PATH: …" already
		}
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Group commit: concurrent writers share one fsync. 2 ms keeps a lone
	// request fast while letting 64 concurrent ones share commits.
	b.MaxBatchDelay = 2 * time.Millisecond
	b.MaxBatchSize = 512
	db := &DB{bolt: b, path: path, outboxReady: make(chan struct{}, 1), webhooksReady: make(chan struct{}, 1)}
	if err := db.init(); err != nil {
		b.Close()
		return nil, err
	}
	// A history import cut short leaves GUIDs in the journal.
	if err := db.mergeGUIDJournal(context.Background()); err != nil {
		b.Close()
		return nil, err
	}
	return db, nil
}

func (db *DB) init() error {
	return db.bolt.Update(func(tx *bolt.Tx) error {
		for _, name := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket(bktMeta)
		if v := meta.Get([]byte("version")); v != nil {
			got := binary.BigEndian.Uint64(v)
			if got > schemaVersion {
				return fmt.Errorf("database schema version %d is newer than this build understands (%d)", got, schemaVersion)
			}
			if got == schemaVersion {
				return nil
			}
		}
		return meta.Put([]byte("version"), u64(schemaVersion))
	})
}

// Close closes the database file.
func (db *DB) Close() error { return db.bolt.Close() }

// Path is the database file's path.
func (db *DB) Path() string { return db.path }

// OutboxReady is signalled after a commit that made outbox items due now.
func (db *DB) OutboxReady() <-chan struct{} { return db.outboxReady }

func (db *DB) signalOutbox() {
	select {
	case db.outboxReady <- struct{}{}:
	default:
	}
}

func nowMillis() int64 { return time.Now().UnixMilli() }

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

func i64(v int64) []byte { return u64(uint64(v)) }

func join(parts ...[]byte) []byte {
	return bytes.Join(parts, nil)
}

// appendOnly returns a bucket whose keys grow (time-ordered IDs, sequence
// numbers): pages split full rather than half-full, as nothing will be
// inserted between their keys later.
func appendOnly(tx *bolt.Tx, name []byte) *bolt.Bucket {
	b := tx.Bucket(name)
	b.FillPercent = 0.95
	return b
}

func putJSON(b *bolt.Bucket, key []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(key, data)
}

func getJSON(b *bolt.Bucket, key []byte, v any) error {
	data := b.Get(key)
	if data == nil {
		return ErrNotFound
	}
	return json.Unmarshal(data, v)
}

// listPrefix decodes every value under a fixed-width ID prefix (a message's
// reactions, a chat's receipts): small sets, read whole.
func listPrefix[T any](db *DB, bucket []byte, id string) ([]T, error) {
	out := []T{}
	err := db.bolt.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(bucket).Cursor()
		prefix := []byte(id)
		for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
			var item T
			if err := json.Unmarshal(v, &item); err != nil {
				return fmt.Errorf("decode %s %q: %w", bucket, k, err)
			}
			out = append(out, item)
		}
		return nil
	})
	return out, err
}

// pageBackward walks keys under prefix from newest to oldest, starting just
// before prefix‖after (or at the newest key when after is nil). It stops after
// limit+1 keys so the caller learns whether more exist without reading them.
func pageBackward(c *bolt.Cursor, prefix, after []byte, limit int, visit func(k, v []byte) error) (hasMore bool, err error) {
	var k, v []byte
	if after == nil {
		// Just past the prefix range, then one step back.
		after = []byte{0xff}
	}
	k, v = c.Seek(join(prefix, after))
	if k == nil {
		k, v = c.Last()
	} else {
		k, v = c.Prev()
	}
	n := 0
	for ; k != nil && bytes.HasPrefix(k, prefix); k, v = c.Prev() {
		if n == limit {
			return true, nil
		}
		if err := visit(k, v); err != nil {
			return false, err
		}
		n++
	}
	return false, nil
}
