package storage

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"

	bolt "go.etcd.io/bbolt"
)

// A line's imported history (ImportHistory) is most of what a database
// holds: a Mac's chat.db brings hundreds of thousands of messages at its
// first start, and nothing happens to nearly all of them afterwards. It is
// stored compactly, in the same buckets and in the same order as every
// other message, so that a chat's pages, cursors and lookups do not change:
//
//   - Its value in chat_messages is a binary record (encodeHistory) instead
//     of JSON: no field names, no ID, chat or line (the key and the chat
//     say them), a canonical GUID in 16 bytes, a contact's own message
//     without its sender (the chat's identifier), the rare fields (files,
//     edits, receipts…) as JSON at the end only when there are any.
//   - Its ID says where it is: historyID packs its date, its chat's number
//     (history_chats) and its sequence number, which with the chat ID make
//     its chat_messages key; so it has no entry in messages.
//   - The GUID index (guids.go) keeps canonical GUIDs in 17 bytes and
//     message IDs in 16 instead of 36 and 30, for every message.
//
// Nothing is rewritten for a database of schema 1: its records, JSON, and
// its index entries, strings, are read as they are, and their IDs and
// order stay; what is imported afterwards is compact.

// historyMark is byte 6 of a history ID's body, where a NewID has random
// bits: an ID of the messages index that has it by chance is found there
// first, and a history ID is accepted only if its record is compact.
const historyMark = 0xb1

// compactFormat leads a compact record; a JSON one leads with '{'.
const compactFormat = 0x01

// maxHistoryChats and maxHistorySeq bound what a history ID can say (24
// and 48 bits); beyond them, and for a date before 1970 or after 2^48 ms,
// a message is stored as JSON with a random ID, as a live one is.
const (
	maxHistoryChats = 1<<24 - 1
	maxHistorySeq   = 1<<48 - 1
	maxHistoryTime  = 1<<48 - 1
)

// historyID is the ID of the history message dated sentAt (Unix ms), of
// the chat numbered num, stored with sequence number seq.
func historyID(sentAt int64, num uint32, seq uint64) string {
	b := historyIDBytes(sentAt, num, seq)
	return "msg_" + idEncoding.EncodeToString(b[:])
}

// historyIDBytes is a history ID's body: its date in 48 bits (as NewID's
// time), the mark, the chat's number in 24 bits and the sequence number
// in 48.
func historyIDBytes(sentAt int64, num uint32, seq uint64) [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], uint64(sentAt)<<16) // bytes 0 to 5
	b[6] = historyMark
	b[7], b[8], b[9] = byte(num>>16), byte(num>>8), byte(num)
	binary.BigEndian.PutUint16(b[10:12], uint16(seq>>32))
	binary.BigEndian.PutUint32(b[12:], uint32(seq))
	return b
}

// parseHistoryID reads what a history ID says; ok is false for an ID that
// is not shaped as one.
func parseHistoryID(id []byte) (sentAt int64, num uint32, seq uint64, ok bool) {
	body, found := bytes.CutPrefix(id, []byte("msg_"))
	if !found || len(body) != IDLen {
		return 0, 0, 0, false
	}
	var b [16]byte
	if n, err := idEncoding.Decode(b[:], body); err != nil || n != 16 || b[6] != historyMark {
		return 0, 0, 0, false
	}
	sentAt = int64(binary.BigEndian.Uint64(b[:8]) >> 16)
	num = uint32(b[7])<<16 | uint32(b[8])<<8 | uint32(b[9])
	seq = uint64(binary.BigEndian.Uint16(b[10:12]))<<32 | uint64(binary.BigEndian.Uint32(b[12:]))
	return sentAt, num, seq, true
}

// historyChatNum is the number of chat chatID in history IDs, given one if
// it has none yet. history_chats maps both ways: chat ID → 4-byte number,
// and number → chat ID (keys of different lengths).
func historyChatNum(tx *bolt.Tx, chatID string) (uint32, error) {
	b := tx.Bucket(bktHistoryChats)
	if v := b.Get([]byte(chatID)); len(v) == 4 {
		return binary.BigEndian.Uint32(v), nil
	}
	n, err := b.NextSequence()
	if err != nil {
		return 0, err
	}
	if n > maxHistoryChats {
		return 0, errTooManyChats
	}
	num := make([]byte, 4)
	binary.BigEndian.PutUint32(num, uint32(n))
	if err := b.Put([]byte(chatID), num); err != nil {
		return 0, err
	}
	return uint32(n), b.Put(num, []byte(chatID))
}

var errTooManyChats = errors.New("too many chats for history IDs")

// messageKey is the chat_messages key of the message with an ID, nil when
// there is none.
func messageKey(tx *bolt.Tx, id []byte) []byte {
	if key := tx.Bucket(bktMessages).Get(id); key != nil {
		return key
	}
	sentAt, num, seq, ok := parseHistoryID(id)
	if !ok {
		return nil
	}
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], num)
	chatID := tx.Bucket(bktHistoryChats).Get(n[:])
	if chatID == nil {
		return nil
	}
	key := join(chatID, i64(sentAt), u64(seq))
	if v := tx.Bucket(bktChatMessages).Get(key); len(v) == 0 || v[0] != compactFormat {
		return nil
	}
	return key
}

// keyChatID is the chat ID a chat_messages key leads with.
func keyChatID(key []byte) []byte { return key[:len(key)-16] }

// msgReader decodes chat_messages values, JSON or compact, keeping the
// chat that compact ones need (a page's messages share it).
type msgReader struct {
	tx   *bolt.Tx
	chat Chat
	num  uint32 // the chat's number in history IDs
}

// decode decodes the message stored under key, with value v, into m,
// which it sets whole.
func (r *msgReader) decode(key, v []byte, m *Message) error {
	*m = Message{}
	if len(v) > 0 && v[0] == compactFormat {
		chatID := keyChatID(key)
		if r.chat.ID != string(chatID) || r.num == 0 {
			if err := getJSON(r.tx.Bucket(bktChats), chatID, &r.chat); err != nil {
				return fmt.Errorf("chat of message %x: %w", key, err)
			}
			n := r.tx.Bucket(bktHistoryChats).Get(chatID)
			if len(n) != 4 {
				return fmt.Errorf("chat %s has no history number", chatID)
			}
			r.num = binary.BigEndian.Uint32(n)
		}
		err := decodeHistory(key, v, &r.chat, r.num, m)
		if err != nil {
			err = fmt.Errorf("decode message %x: %w", key, err)
		}
		return err
	}
	if err := json.Unmarshal(v, m); err != nil {
		return fmt.Errorf("decode message %x: %w", key, err)
	}
	return nil
}

// loadMessage reads the message stored under key into m.
func loadMessage(tx *bolt.Tx, key []byte, m *Message) error {
	v := tx.Bucket(bktChatMessages).Get(key)
	if v == nil {
		return ErrNotFound
	}
	r := msgReader{tx: tx}
	return r.decode(key, v, m)
}

// storeMessage writes message m back under key, in the form it has there:
// a history message stays compact, its ID the one its key gives.
func storeMessage(tx *bolt.Tx, key []byte, m *Message) error {
	if err := noteMessage(tx, key); err != nil {
		return err
	}
	b := tx.Bucket(bktChatMessages)
	if v := b.Get(key); len(v) > 0 && v[0] == compactFormat {
		var c Chat
		if err := getJSON(tx.Bucket(bktChats), keyChatID(key), &c); err != nil {
			return fmt.Errorf("chat of message %s: %w", m.ID, err)
		}
		return b.Put(key, encodeHistory(m, &c))
	}
	return putJSON(b, key, m)
}

// Flags of a compact record.
const (
	histFromMe     = 1 << iota
	histAudio      // is_audio_message
	histText       // text is set (it may be empty)
	histSenderChat // the sender is the chat's identifier
	histGUID16     // the GUID is a canonical UUID, in 16 bytes
	histExtra      // rare fields follow, as JSON
)

// Services in one byte; 0 is followed by the name.
var historyServices = []string{1: "imessage", 2: "sms"}

// historyExtra is what a compact record holds as JSON, when any is set.
type historyExtra struct {
	Attachments  []Attachment `json:"a,omitempty"`
	OutboxID     string       `json:"o,omitempty"`
	ReplyToGUID  string       `json:"r,omitempty"`
	FailedAt     int64        `json:"f,omitempty"`
	Error        string       `json:"e,omitempty"`
	EditedAt     int64        `json:"ed,omitempty"`
	UnsentAt     int64        `json:"u,omitempty"`
	DeliveredAt  int64        `json:"d,omitempty"`
	ReadAt       int64        `json:"rd,omitempty"`
	UnsentParts  *UnsentParts `json:"up,omitempty"`
	EditRequests int          `json:"er,omitempty"`
	EchoGUID     string       `json:"ec,omitempty"`
}

func (x *historyExtra) empty() bool {
	return len(x.Attachments) == 0 && x.OutboxID == "" && x.ReplyToGUID == "" && x.FailedAt == 0 && x.Error == "" &&
		x.EditedAt == 0 && x.UnsentAt == 0 && x.DeliveredAt == 0 && x.ReadAt == 0 && x.UnsentParts == nil && x.EditRequests == 0 &&
		x.EchoGUID == ""
}

// encodeHistory is message m of chat c as a compact record: the format
// byte, the flags, the service, the GUID, the sender unless it is the
// chat's identifier, synced_at, the text, then the rare fields as JSON.
// Its ID, chat, line and sent_at are those its key and chat say.
func encodeHistory(m *Message, c *Chat) []byte {
	out := make([]byte, 2, 48+len(m.GUID)+len(m.Sender)+textLen(m.Text))
	out[0] = compactFormat
	var flags byte
	if m.IsFromMe {
		flags |= histFromMe
	}
	if m.IsAudioMessage {
		flags |= histAudio
	}
	svc := 0
	for i, s := range historyServices {
		if i > 0 && s == m.Service {
			svc = i
		}
	}
	out = append(out, byte(svc))
	if svc == 0 {
		out = appendString(out, m.Service)
	}
	if g, ok := uuidBytes(m.GUID); ok {
		flags |= histGUID16
		out = append(out, g[:]...)
	} else {
		out = appendString(out, m.GUID)
	}
	if m.Sender == c.Identifier && m.Sender != "" {
		flags |= histSenderChat
	} else {
		out = appendString(out, m.Sender)
	}
	out = binary.AppendVarint(out, m.SyncedAt)
	if m.Text != nil {
		flags |= histText
		out = appendString(out, *m.Text)
	}
	x := historyExtra{Attachments: m.Attachments, OutboxID: m.OutboxID, ReplyToGUID: m.ReplyToGUID, FailedAt: m.FailedAt,
		Error: m.Error, EditedAt: m.EditedAt, UnsentAt: m.UnsentAt, DeliveredAt: m.DeliveredAt, ReadAt: m.ReadAt,
		UnsentParts: m.UnsentParts, EditRequests: m.EditRequests, EchoGUID: m.EchoGUID}
	if !x.empty() {
		flags |= histExtra
		data, err := json.Marshal(&x)
		if err != nil {
			panic(err) // plain fields: cannot fail
		}
		out = append(out, data...)
	}
	out[1] = flags
	return out
}

func textLen(s *string) int {
	if s == nil {
		return 0
	}
	return len(*s)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

var errShortRecord = errors.New("short compact record")

// decodeHistory decodes a compact record stored under key, of chat c.
func decodeHistory(key, v []byte, c *Chat, num uint32, m *Message) error {
	if len(v) < 3 {
		return errShortRecord
	}
	sentAt := int64(binary.BigEndian.Uint64(key[len(key)-16:]))
	seq := binary.BigEndian.Uint64(key[len(key)-8:])
	flags := v[1]
	p := v[2:]
	svc := int(p[0])
	p = p[1:]
	readString := func() (string, bool) {
		n, k := binary.Uvarint(p)
		if k <= 0 || uint64(len(p)-k) < n {
			return "", false
		}
		s := string(p[k : k+int(n)])
		p = p[k+int(n):]
		return s, true
	}
	ok := true
	if svc == 0 {
		m.Service, ok = readString()
	} else if svc < len(historyServices) {
		m.Service = historyServices[svc]
	} else {
		return fmt.Errorf("unknown service %d", svc)
	}
	if !ok {
		return errShortRecord
	}
	if flags&histGUID16 != 0 {
		if len(p) < 16 {
			return errShortRecord
		}
		m.GUID = uuidString(p[:16])
		p = p[16:]
	} else if m.GUID, ok = readString(); !ok {
		return errShortRecord
	}
	if flags&histSenderChat != 0 {
		m.Sender = c.Identifier
	} else if m.Sender, ok = readString(); !ok {
		return errShortRecord
	}
	synced, k := binary.Varint(p)
	if k <= 0 {
		return errShortRecord
	}
	m.SyncedAt, p = synced, p[k:]
	if flags&histText != 0 {
		t, ok := readString()
		if !ok {
			return errShortRecord
		}
		m.Text = &t
	}
	m.Attachments = []Attachment{}
	if flags&histExtra != 0 {
		var x historyExtra
		if err := json.Unmarshal(p, &x); err != nil {
			return err
		}
		if x.Attachments != nil {
			m.Attachments = x.Attachments
		}
		m.OutboxID, m.ReplyToGUID, m.FailedAt, m.Error = x.OutboxID, x.ReplyToGUID, x.FailedAt, x.Error
		m.EditedAt, m.UnsentAt, m.DeliveredAt, m.ReadAt = x.EditedAt, x.UnsentAt, x.DeliveredAt, x.ReadAt
		m.UnsentParts, m.EditRequests, m.EchoGUID = x.UnsentParts, x.EditRequests, x.EchoGUID
	} else if len(p) != 0 {
		return fmt.Errorf("%d bytes left over", len(p))
	}
	m.ID = historyID(sentAt, num, seq)
	m.LineID, m.ChatID = c.LineID, c.ID
	m.IsFromMe, m.IsAudioMessage = flags&histFromMe != 0, flags&histAudio != 0
	m.SentAt = sentAt
	return nil
}

// uuidBytes is a GUID in Messages' form (upper-case hex, 8-4-4-4-12) as 16
// bytes; ok is false for any other GUID, which is then stored as it is.
func uuidBytes(s string) (b [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return b, false
	}
	j := 0
	for i := 0; i < 36; i += 2 {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			i--
			continue
		}
		hi, lo := upperHex(s[i]), upperHex(s[i+1])
		if hi > 15 || lo > 15 {
			return b, false
		}
		b[j] = hi<<4 | lo
		j++
	}
	return b, true
}

// upperHex is the value of an upper-case hex digit, 255 for anything else.
func upperHex(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 255
}

// uuidString is the upper-case 8-4-4-4-12 form of 16 bytes.
func uuidString(b []byte) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 0, 36)
	for i, c := range b {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, digits[c>>4], digits[c&15])
	}
	return string(out)
}
