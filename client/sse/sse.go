// Package sse writes and reads server-sent events (text/event-stream): the
// framing of the API's event stream (GET /v1/events) and of the console's
// live chat, and of what the Go client reads.
//
// It exists so that there is one writer to get right. SSE ends a line at
// CR, LF or CRLF alike, so a line break that reaches a field unencoded ends
// the field there, and whatever follows it, written by whoever wrote the
// data (a contact's text, a group's name, a file's name), is read as a field
// or an event of its own. Writer splits data at every one of them, as the
// specification's own encoding does, and refuses ids and event names that
// hold one. Slots, beside them, bounds the streams one holder (an API key,
// a console session) keeps open.
package sse

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Writer writes the events of one stream.
type Writer struct {
	w   io.Writer
	rc  *http.ResponseController
	buf bytes.Buffer
}

// Start answers w as an event stream (status 200, the stream's headers)
// with a first comment, flushed, so that the client sees the stream open
// before any event.
func Start(w http.ResponseWriter, comment string) *Writer {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx: pass each event on as it comes
	w.WriteHeader(http.StatusOK)
	// ResponseController finds the Flusher through wrappers that hide it.
	sw := &Writer{w: w, rc: http.NewResponseController(w)}
	sw.Comment(comment)
	sw.Flush()
	return sw
}

// ErrField is an event's id or name holding a line break, which would end
// the field early, or NUL, for which a reader ignores the id.
var ErrField = errors.New("sse: an event's id and name may not hold CR, LF or NUL")

// Event writes one event: its id ("" keeps the last one), its name (""
// is the default type, "message") and its data. The data is split into
// one data line at each CR, LF or CRLF, so a reader gets the data back
// with each of them as LF, and nothing in it can end the event or start a
// field. Data that must keep a CR encodes it first: JSON does (\r), HTML
// can (&#13;).
func (w *Writer) Event(id, name, data string) error {
	if !plain(id) || !plain(name) {
		return fmt.Errorf("%w: id %q, event %q", ErrField, id, name)
	}
	w.buf.Reset()
	if id != "" {
		w.field("id", id)
	}
	if name != "" {
		w.field("event", name)
	}
	for _, line := range splitLines(data) {
		w.field("data", line)
	}
	w.buf.WriteByte('\n')
	_, err := w.w.Write(w.buf.Bytes())
	return err
}

// ID tells the reader where the stream is without an event: the id it
// resumes after (Last-Event-ID) if it reconnects before the next event.
func (w *Writer) ID(id string) error {
	if !plain(id) || id == "" {
		return fmt.Errorf("%w: id %q", ErrField, id)
	}
	w.buf.Reset()
	w.field("id", id)
	w.buf.WriteByte('\n')
	_, err := w.w.Write(w.buf.Bytes())
	return err
}

// Comment writes a comment, which readers ignore: a stream's sign of life.
// Each line of text is a comment line of its own.
func (w *Writer) Comment(text string) error {
	w.buf.Reset()
	for _, line := range splitLines(text) {
		w.buf.WriteString(": ")
		w.buf.WriteString(line)
		w.buf.WriteByte('\n')
	}
	w.buf.WriteByte('\n')
	_, err := w.w.Write(w.buf.Bytes())
	return err
}

// Flush sends what was written to the client.
func (w *Writer) Flush() error { return w.rc.Flush() }

func (w *Writer) field(name, value string) {
	w.buf.WriteString(name)
	w.buf.WriteString(": ")
	w.buf.WriteString(value)
	w.buf.WriteByte('\n')
}

func plain(s string) bool { return !strings.ContainsAny(s, "\r\n\x00") }

// splitLines splits s at each CRLF, CR and LF: the line ends of SSE.
func splitLines(s string) []string {
	var out []string
	for {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			return append(out, s)
		}
		out = append(out, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
}

// Event is an event as a reader gets it.
type Event struct {
	// ID is the stream's last event ID when the event came: its own, or
	// the last one the stream set before it.
	ID string
	// Name is the event's type: "message" when the stream named none.
	Name string
	Data string
}

// Reader reads events as the specification's parser (a browser's
// EventSource) does: lines end at CRLF, LF or CR; a data field's value is
// one line of the data; comments and unknown fields are skipped.
type Reader struct {
	r       *bufio.Reader
	pending []string // lines read but not yet parsed
	err     error    // what ended the reading, once pending is empty
	idBuf   string   // the id the stream last named
	lastID  string   // idBuf as of the last blank line: in effect
}

// NewReader reads the events of r.
func NewReader(r io.Reader) *Reader { return &Reader{r: bufio.NewReaderSize(r, 64<<10)} }

// Next returns the next event. At the end of the stream it returns io.EOF
// when the stream ended between events (the server ended it), and
// io.ErrUnexpectedEOF when it ended inside one.
func (r *Reader) Next() (Event, error) {
	var data strings.Builder
	name, hasData, inEvent := "", false, false
	for {
		line, err := r.line()
		if err != nil {
			if err == io.EOF && inEvent {
				err = io.ErrUnexpectedEOF
			}
			return Event{}, err
		}
		if line == "" {
			// The id takes effect here, with or without an event: an
			// event cut off before its end does not move it.
			r.lastID = r.idBuf
			if hasData {
				d := data.String()
				return Event{ID: r.lastID, Name: cmp.Or(name, "message"), Data: d[:len(d)-1]}, nil
			}
			name, inEvent = "", false
			continue
		}
		if line[0] == ':' {
			continue
		}
		inEvent = true
		field, value, found := strings.Cut(line, ":")
		if found {
			value = strings.TrimPrefix(value, " ")
		}
		switch field {
		case "event":
			name = value
		case "data":
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				r.idBuf = value
			}
		}
	}
}

// LastID is the last event ID the stream set, by a whole event or by an
// id alone (Writer.ID): where a reader that reconnects resumes.
func (r *Reader) LastID() string { return r.lastID }

// line returns the next line, without its end.
func (r *Reader) line() (string, error) {
	for len(r.pending) == 0 {
		if r.err != nil {
			return "", r.err
		}
		// A CR followed by LF is one line end, and ReadString reads
		// through the LF: the pair is never split between two reads.
		chunk, err := r.r.ReadString('\n')
		r.err = err
		ended := strings.HasSuffix(chunk, "\n")
		if ended {
			chunk = strings.TrimSuffix(chunk[:len(chunk)-1], "\r")
		}
		parts := strings.Split(chunk, "\r")
		if !ended {
			// The stream ended inside a line: its last part is no line,
			// and the stream was cut off.
			if parts = parts[:len(parts)-1]; err == io.EOF && !strings.HasSuffix(chunk, "\r") && chunk != "" {
				r.err = io.ErrUnexpectedEOF
			}
		}
		r.pending = parts
	}
	line := r.pending[0]
	r.pending = r.pending[1:]
	return line, nil
}

// Slots bounds the streams each holder (an API key, a console session)
// keeps open at once.
type Slots struct {
	max  int
	mu   sync.Mutex
	open map[string]int
}

// NewSlots returns slots for max streams per holder.
func NewSlots(max int) *Slots { return &Slots{max: max, open: map[string]int{}} }

// Take takes one of holder's places, or reports false when they are all
// taken. release gives it back; call it when the stream ends.
func (s *Slots) Take(holder string) (release func(), ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open[holder] >= s.max {
		return nil, false
	}
	s.open[holder]++
	return sync.OnceFunc(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.open[holder]--; s.open[holder] == 0 {
			delete(s.open, holder)
		}
	}), true
}
