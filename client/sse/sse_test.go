package sse_test

import (
	"errors"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/client/sse"
)

// hostile is data as a contact may write it: every line end SSE knows,
// lone and in runs, a field of its own after each, the separator of
// Unicode (which SSE does not treat as a line end) and NUL.
var hostile = []string{
	"plain",
	"a\rb", "a\nb", "a\r\nb", "a\n\rb", "a\r\r\nb",
	"\r", "\n", "\r\n", "\n\n", "\r\r",
	"x\r\rdata: injected\r\r", "x\n\nevent: fake\nid: 99\ndata: forged\n\n",
	"x\rid: 1\x00", "x\r: comment\rretry: 1",
	"line\u2028separator\u2029paragraph", "nul\x00byte",
	" leading space", "data: looks like a field", "",
}

// Whatever the data, each event written is read back as exactly one event,
// with its id and name, and its data with every CR and CRLF as LF (the SSE
// encoding); events with no line end come back byte for byte.
func TestRoundTrip(t *testing.T) {
	rec := httptest.NewRecorder()
	w := sse.Start(rec, "hello\rdata: not an event")
	var want []sse.Event
	for i, data := range hostile {
		id := string(rune('a' + i))
		if err := w.Event(id, "message.received", data); err != nil {
			t.Fatal(err)
		}
		want = append(want, sse.Event{ID: id, Name: "message.received", Data: lf(data)})
		if err := w.Comment("keep\nalive\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.ID("z"); err != nil {
		t.Fatal(err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	r := sse.NewReader(rec.Body)
	var got []sse.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	if !slices.Equal(want, got) {
		t.Errorf("events read back:\n%q\nwant\n%q", got, want)
	}
	if r.LastID() != "z" {
		t.Errorf("LastID %q after an id alone, want z", r.LastID())
	}
}

func lf(s string) string { return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\r", "\n") }

// An id or a name with a line end would end its field: refused, and
// nothing written.
func TestFieldsRefused(t *testing.T) {
	rec := httptest.NewRecorder()
	w := sse.Start(rec, "x")
	before := rec.Body.Len()
	for _, c := range []struct{ id, name string }{{"1\r", "m"}, {"1", "m\nevent: x"}, {"1\x00", "m"}, {"1", "m\r\n"}} {
		if err := w.Event(c.id, c.name, "data"); !errors.Is(err, sse.ErrField) {
			t.Errorf("id %q name %q: %v, want ErrField", c.id, c.name, err)
		}
	}
	if err := w.ID("2\n"); !errors.Is(err, sse.ErrField) {
		t.Errorf("ID with LF: %v", err)
	}
	if rec.Body.Len() != before {
		t.Errorf("refused events wrote %q", rec.Body.String()[before:])
	}
}

// The reader is the specification's: CR alone ends a line, a space after
// the colon is dropped, an id with NUL is ignored, and a stream cut inside
// an event (or inside a line) is not a clean end.
func TestReaderAsSpecified(t *testing.T) {
	stream := "retry: 10\rid: 7\revent: a\rdata:x\r\rdata:  two spaces\r\ndata\n\nid: 8\x00\ndata: y\n\n:comment\n\n"
	r := sse.NewReader(strings.NewReader(stream))
	var got []sse.Event
	for {
		ev, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, ev)
	}
	want := []sse.Event{{ID: "7", Name: "a", Data: "x"}, {ID: "7", Name: "message", Data: " two spaces\n"}, {ID: "7", Name: "message", Data: "y"}}
	if !slices.Equal(want, got) {
		t.Errorf("read\n%q\nwant\n%q", got, want)
	}
	for _, cut := range []string{"data: x\n", "data: x", "id: 1\ndata: x\n"} {
		r := sse.NewReader(strings.NewReader("id: 0\n\n" + cut))
		if _, err := r.Next(); err != io.ErrUnexpectedEOF {
			t.Errorf("cut off at %q: %v, want io.ErrUnexpectedEOF", cut, err)
		}
		if r.LastID() != "0" {
			t.Errorf("cut off at %q: LastID %q, want 0 (the event cut off never came)", cut, r.LastID())
		}
	}
}

// Slots: max per holder, holders apart, a place given back once only.
func TestSlots(t *testing.T) {
	s := sse.NewSlots(2)
	r1, ok1 := s.Take("key_a")
	_, ok2 := s.Take("key_a")
	_, ok3 := s.Take("key_a")
	_, okB := s.Take("key_b")
	if !ok1 || !ok2 || ok3 || !okB {
		t.Fatalf("takes: %v %v %v %v, want true true false true", ok1, ok2, ok3, okB)
	}
	r1()
	r1()
	if _, ok := s.Take("key_a"); !ok {
		t.Error("a place given back is not taken again")
	}
	if _, ok := s.Take("key_a"); ok {
		t.Error("a release called twice gave back two places")
	}
}
