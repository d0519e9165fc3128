package storage

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"hash/maphash"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// The GUID index (message_guids) tells whether a network message is stored.
// GUIDs are random, so a history import writing 5,000 of them into an index
// of a million rewrites nearly every page of the index in every transaction:
// over a first start that was gigabytes of writes and most of the time.
//
// An import writes its GUIDs to a journal instead: one small bucket per
// transaction, in key order, so that its pages are written once. At the end
// of the import (SettleHistory), at the next open if the daemon stopped
// before, or when the journal holds journalMergeAt generations, the journal
// moves into the index a key range per transaction, so that each page of
// the index is rewritten once, and no transaction holds more than a slice
// of it in memory. Lookups read the index and then the journal, so a GUID is
// found as soon as its message is committed. Moving is idempotent: a merge
// cut short is repeated.
//
// An import asks, for each GUID of a batch, whether it is stored already:
// a Bloom filter of the journal's GUIDs answers most of the journal's part
// of that question in memory.
const (
	// journalMergeAt is how many generations (of up to 5,000 GUIDs) the
	// journal may hold before it is merged during an import.
	journalMergeAt = 200
	// mergeTxEntries and indexPerMergeTx bound one merge transaction: the
	// journal entries it moves, and the part of the index it spans (the
	// pages it rewrites are held in memory until it commits).
	mergeTxEntries  = 50_000
	indexPerMergeTx = 100_000
)

// lookupGUID returns the ID of the message with a network GUID, or nil.
func lookupGUID(tx *bolt.Tx, guid []byte) []byte {
	k := guidKey(guid)
	if v := lookupGUIDKey(tx, k); v != nil {
		return idFromValue(v)
	}
	if len(k) != len(guid) {
		// Schema 1 kept every GUID as a string.
		if v := lookupGUIDKey(tx, guid); v != nil {
			return idFromValue(v)
		}
	}
	return nil
}

// lookupGUIDKey looks a GUID key up in the index, then in the journal.
func lookupGUIDKey(tx *bolt.Tx, k []byte) []byte {
	if v := tx.Bucket(bktMessageGUIDs).Get(k); v != nil {
		return v
	}
	return lookupJournal(tx, k)
}

// putGUID indexes a message's GUID.
func putGUID(tx *bolt.Tx, guid, id string) error {
	return tx.Bucket(bktMessageGUIDs).Put(guidKey([]byte(guid)), idValue([]byte(id)))
}

// guidKey is a GUID's key in the index and the journal: a GUID in
// Messages' form (an upper-case UUID) is a 0 byte and its 16 bytes,
// anything else the GUID itself (which never starts with a 0 byte).
func guidKey(guid []byte) []byte {
	if b, ok := uuidBytes(string(guid)); ok {
		return append([]byte{0}, b[:]...)
	}
	return guid
}

// idValue is a message ID as the index keeps it: a msg_ ID in its 16
// bytes, anything else as it is.
func idValue(id []byte) []byte {
	if body, ok := bytes.CutPrefix(id, []byte("msg_")); ok && ValidID(string(id), "msg_") {
		b := make([]byte, 16)
		if n, err := idEncoding.Decode(b, body); err == nil && n == 16 && idEncoding.EncodeToString(b) == string(body) {
			return b
		}
	}
	return id
}

// idFromValue is the message ID an index value holds.
func idFromValue(v []byte) []byte {
	if len(v) == 16 {
		return []byte("msg_" + idEncoding.EncodeToString(v))
	}
	return v
}

// CompactMessageID is a message ID as an index keeps it (idValue): a msg_
// ID in its 16 bytes, anything else as it is. MessageIDFromCompact gives
// the ID back.
func CompactMessageID(id string) []byte { return idValue([]byte(id)) }

// MessageIDFromCompact is the message ID CompactMessageID kept.
func MessageIDFromCompact(v []byte) string { return string(idFromValue(v)) }

// lookupJournal looks a GUID up in each journal generation.
func lookupJournal(tx *bolt.Tx, guid []byte) []byte {
	j := tx.Bucket(bktGUIDJournal)
	c := j.Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			continue
		}
		if id := j.Bucket(k).Get(guid); id != nil {
			return id
		}
	}
	return nil
}

// journal is the GUID journal's in-memory side. The daemon's imports and
// merges hold mu for each of their transactions, so that the filter always
// holds every GUID the journal does.
type journal struct {
	mu          sync.Mutex
	filter      *guidFilter // nil while the journal is empty
	generations int
}

// journalGUIDs writes a generation of GUID → message ID pairs to the
// journal. pairs must be sorted by GUID. The caller holds db.journal.mu.
func (db *DB) journalGUIDs(tx *bolt.Tx, pairs []*heldMessage) error {
	if len(pairs) == 0 {
		return nil
	}
	j := tx.Bucket(bktGUIDJournal)
	gen, err := j.NextSequence()
	if err != nil {
		return err
	}
	b, err := j.CreateBucket(u64(gen))
	if err != nil {
		return err
	}
	b.FillPercent = 1 // written once, in order, never added to
	for _, m := range pairs {
		if err := b.Put(m.guid, m.idValue); err != nil {
			return err
		}
	}
	f := db.journal.filter
	if f == nil || f.n+len(pairs) > f.capacity {
		// Grown from what the journal holds, this generation included.
		capacity := 1 << 14
		if f != nil {
			capacity = f.capacity
		}
		for capacity < 2*(f.count()+len(pairs)) {
			capacity *= 4
		}
		f = newGUIDFilter(capacity)
		err := j.ForEach(func(name, v []byte) error {
			if v != nil {
				return nil
			}
			return j.Bucket(name).ForEach(func(guid, _ []byte) error {
				f.add(guid)
				return nil
			})
		})
		if err != nil {
			return err
		}
		// The transaction may still fail: a filter holding GUIDs the
		// journal does not only costs lookups.
		db.journal.filter = f
	} else {
		for _, m := range pairs {
			f.add(m.guid)
		}
	}
	db.journal.generations++
	return nil
}

// mayBeJournaled is false for a GUID that is surely not in the journal. The
// caller holds db.journal.mu.
func (db *DB) mayBeJournaled(guid []byte) bool {
	return db.journal.filter != nil && db.journal.filter.mayContain(guid)
}

// SettleHistory moves what history imports left in the GUID journal into
// the GUID index. An import calls it when it is done; until then, and if it
// is never called, lookups still find every GUID.
func (db *DB) SettleHistory(ctx context.Context) error {
	return db.mergeGUIDJournal(ctx)
}

// mergeGUIDJournal moves the journal into the GUID index, a key range per
// transaction, and then deletes it.
func (db *DB) mergeGUIDJournal(ctx context.Context) error {
	db.journal.mu.Lock()
	defer db.journal.mu.Unlock()
	var names [][]byte
	var journaled, indexed int
	err := db.bolt.View(func(tx *bolt.Tx) error {
		j := tx.Bucket(bktGUIDJournal)
		return j.ForEach(func(k, v []byte) error {
			if v == nil {
				names = append(names, slices.Clone(k))
				journaled += j.Bucket(k).Stats().KeyN
			}
			return nil
		})
	})
	if err != nil || len(names) == 0 {
		return err
	}
	err = db.bolt.View(func(tx *bolt.Tx) error {
		indexed = tx.Bucket(bktMessageGUIDs).Stats().KeyN
		return nil
	})
	if err != nil {
		return err
	}
	// GUIDs are spread over the key space: a transaction moving 1/n of
	// the journal spans about 1/n of the index.
	txs := max(1, (indexed+indexPerMergeTx-1)/indexPerMergeTx, (journaled+mergeTxEntries-1)/mergeTxEntries)
	chunk := max(1, (journaled+txs-1)/txs)
	var from []byte // the least GUID not moved yet
	for done := false; !done; {
		if err := ctx.Err(); err != nil {
			return err
		}
		err := db.bolt.Update(func(tx *bolt.Tx) error {
			j := tx.Bucket(bktGUIDJournal)
			var heads headHeap
			for _, name := range names {
				h := &journalHead{c: j.Bucket(name).Cursor()}
				if from == nil {
					h.k, h.v = h.c.First()
				} else {
					h.k, h.v = h.c.Seek(from)
				}
				if h.k != nil {
					heads = append(heads, h)
				}
			}
			heap.Init(&heads)
			index := tx.Bucket(bktMessageGUIDs)
			// Sorted runs: pages filled rather than split in halves.
			index.FillPercent = 0.9
			var last []byte
			for range chunk {
				if len(heads) == 0 {
					done = true
					break
				}
				least := heads[0]
				if err := index.Put(least.k, slices.Clone(least.v)); err != nil {
					return err
				}
				last = least.k
				if least.k, least.v = least.c.Next(); least.k == nil {
					heap.Pop(&heads)
				} else {
					heap.Fix(&heads, 0)
				}
			}
			done = done || len(heads) == 0
			if !done {
				from = append(slices.Clone(last), 0)
				return nil
			}
			for _, name := range names {
				if err := j.DeleteBucket(name); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("merge the GUID journal: %w", err)
		}
	}
	db.journal.filter, db.journal.generations = nil, 0
	return nil
}

// journalHead is where a merge is in one journal generation; headHeap
// orders generations by their next GUID.
type journalHead struct {
	c    *bolt.Cursor
	k, v []byte
}

type headHeap []*journalHead

func (h headHeap) Len() int           { return len(h) }
func (h headHeap) Less(i, j int) bool { return bytes.Compare(h[i].k, h[j].k) < 0 }
func (h headHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *headHeap) Push(x any)        { *h = append(*h, x.(*journalHead)) }
func (h *headHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// guidFilter is a Bloom filter of GUIDs: 16 bits and 8 probes per GUID at
// capacity, for about one false "maybe" in 2,000.
type guidFilter struct {
	seed     maphash.Seed
	bits     []uint64
	capacity int
	n        int
}

const guidFilterProbes = 8

func newGUIDFilter(capacity int) *guidFilter {
	return &guidFilter{seed: maphash.MakeSeed(), bits: make([]uint64, capacity*16/64), capacity: capacity}
}

func (f *guidFilter) count() int {
	if f == nil {
		return 0
	}
	return f.n
}

func (f *guidFilter) add(guid []byte) {
	h := maphash.Bytes(f.seed, guid)
	step := h>>33 | 1
	m := uint64(len(f.bits) * 64)
	for range guidFilterProbes {
		i := h % m
		f.bits[i/64] |= 1 << (i % 64)
		h += step
	}
	f.n++
}

func (f *guidFilter) mayContain(guid []byte) bool {
	h := maphash.Bytes(f.seed, guid)
	step := h>>33 | 1
	m := uint64(len(f.bits) * 64)
	for range guidFilterProbes {
		i := h % m
		if f.bits[i/64]&(1<<(i%64)) == 0 {
			return false
		}
		h += step
	}
	return true
}
