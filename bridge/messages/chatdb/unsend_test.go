package chatdb_test

import (
	"slices"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// image is a photo attachment for the unsend tests.
func image(name string) chatdbtest.FileSpec {
	return chatdbtest.FileSpec{Path: "~/Library/Messages/Attachments/a/b/c/" + name, MimeType: "image/jpeg", TransferName: name, TotalBytes: 10}
}

func names(atts []chatdb.Attachment) []string {
	var out []string
	for _, a := range atts {
		out = append(out, a.TransferName)
	}
	return out
}

// A message taken back whole: by date_retracted and an emptied row (macOS
// 13 to 15), or by an edit that empties the body with date_retracted left
// 0 (macOS 26). Either way the summary lists every part and none is left.
func TestUnsendWhole(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	msg := chatdbtest.Msg{Chat: chat, From: alice, Text: "look", Attachments: []chatdbtest.FileSpec{image("pic.jpeg")}}
	_, retracted := f.Insert(msg)
	_, emptied := f.Insert(msg)
	db := open(t, f)
	at := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	f.Unsend(retracted, at)
	f.UnsendAsEdit(emptied, at.Add(time.Second))

	for _, tc := range []struct {
		name, guid string
		at         time.Time
		retracted  bool
	}{{"with date_retracted", retracted, at, true}, {"without date_retracted", emptied, at.Add(time.Second), false}} {
		r := byGUID(t, db, tc.guid)
		when, unsent := r.Unsent()
		if !unsent || !when.Equal(tc.at) || r.UnsentParts() != nil {
			t.Errorf("%s: Unsent() = %v, %v, UnsentParts() = %v; want %v", tc.name, when, unsent, r.UnsentParts(), tc.at)
		}
		if !slices.Equal(r.RetractedParts, []int{0, 1}) || r.PartCount != 0 || r.DateRetracted.IsZero() != !tc.retracted {
			t.Errorf("%s: retracted parts %v, part count %d, date_retracted %v", tc.name, r.RetractedParts, r.PartCount, r.DateRetracted)
		}
		if tc.retracted && (r.Text != nil || len(r.Attachments) != 0) {
			t.Errorf("%s: text %q, attachments %v left", tc.name, str(r.Text), names(r.Attachments))
		}
	}
}

// Taking back one part of a message keeps the others: a photo of a
// text+photo message, or only its text, or two photos one after the other
// and then the rest. The parts are numbered as Messages writes such a
// message: the attachments in order, then the text.
func TestUnsendParts(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	withPhoto := chatdbtest.Msg{Chat: chat, From: alice, Text: "look", Attachments: []chatdbtest.FileSpec{image("pic.jpeg")}}
	_, photoBack := f.Insert(withPhoto)
	_, textBack := f.Insert(withPhoto)
	withPhoto.Ventura = true
	_, venturaTextBack := f.Insert(withPhoto)
	_, twoPhotos := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "both", Attachments: []chatdbtest.FileSpec{image("one.jpeg"), image("two.jpeg")}})
	db := open(t, f)
	at := time.Now().Add(-time.Minute).Truncate(time.Microsecond)

	f.UnsendParts(photoBack, []int{0}, at)
	f.UnsendParts(textBack, []int{1}, at)
	f.UnsendParts(venturaTextBack, []int{1}, at)
	f.UnsendParts(twoPhotos, []int{1}, at)
	for _, tc := range []struct {
		name, guid string
		parts      []int
		text       string // as str gives it: "<nil>" for none
		files      []string
	}{
		{"the photo", photoBack, []int{0}, "look", nil},
		{"the text", textBack, []int{1}, "<nil>", []string{"pic.jpeg"}},
		{"the text of a Ventura-style row", venturaTextBack, []int{1}, "<nil>", []string{"pic.jpeg"}},
		{"the second photo", twoPhotos, []int{1}, "both", []string{"one.jpeg"}},
	} {
		r := byGUID(t, db, tc.guid)
		if _, unsent := r.Unsent(); unsent {
			t.Errorf("%s: the message counts as unsent", tc.name)
		}
		if got := r.UnsentParts(); !slices.Equal(got, tc.parts) || !r.DateEdited.Equal(at) {
			t.Errorf("%s: UnsentParts() = %v, edited %v; want %v", tc.name, got, r.DateEdited, tc.parts)
		}
		if str(r.Text) != tc.text || !slices.Equal(names(r.Attachments), tc.files) || r.Kind() != chatdb.KindMessage {
			t.Errorf("%s: text %q, attachments %v, kind %v; want %q, %v", tc.name, str(r.Text), names(r.Attachments), r.Kind(), tc.text, tc.files)
		}
	}

	// The first photo too, later: both listed; then the rest, whole.
	f.UnsendParts(twoPhotos, []int{0}, at.Add(time.Second))
	r := byGUID(t, db, twoPhotos)
	if got := r.UnsentParts(); !slices.Equal(got, []int{0, 1}) || str(r.Text) != "both" || len(r.Attachments) != 0 || r.PartCount != 1 {
		t.Errorf("both photos back: UnsentParts() = %v, text %q, attachments %v, part count %d", got, str(r.Text), names(r.Attachments), r.PartCount)
	}
	f.UnsendAsEdit(twoPhotos, at.Add(2*time.Second))
	r = byGUID(t, db, twoPhotos)
	if when, unsent := r.Unsent(); !unsent || !when.Equal(at.Add(2*time.Second)) || r.UnsentParts() != nil || !slices.Equal(r.RetractedParts, []int{0, 1, 2}) {
		t.Errorf("the rest back: Unsent() = %v, %v; UnsentParts() = %v; retracted %v", when, unsent, r.UnsentParts(), r.RetractedParts)
	}
}

// An edit whose body does not decode leaves the row without text: it is
// still an edit, not an unsend.
func TestEditUndecodableBody(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, g := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "see you at 5", Ventura: true})
	db := open(t, f)
	at := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
	f.Edit(g, "see you at 6", at)
	f.Exec("UPDATE message SET attributedBody = x'040b73747265616d7479706564ffff' WHERE guid = ?", g)

	r := byGUID(t, db, g)
	if r.Text != nil || !r.DateEdited.Equal(at) {
		t.Fatalf("text %q, edited %v; want no text, edited %v", str(r.Text), r.DateEdited, at)
	}
	if when, unsent := r.Unsent(); unsent || r.UnsentParts() != nil {
		t.Errorf("an undecodable edit: Unsent() = %v, %v; UnsentParts() = %v", when, unsent, r.UnsentParts())
	}
}

// Without message_summary_info or part_count (older macOS), or with a
// summary that does not parse, date_retracted alone tells an unsend; an
// emptied body does not.
func TestUnsendWithoutSummary(t *testing.T) {
	for _, tc := range []struct {
		name string
		drop string // the column the database lacks, "" for none
	}{{"no message_summary_info", "message_summary_info"}, {"no part_count", "part_count"}, {"a summary that does not parse", ""}} {
		t.Run(tc.name, func(t *testing.T) {
			f := chatdbtest.New(t, t.TempDir())
			chat := f.DirectChat("iMessage", alice)
			_, retracted := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "oops"})
			_, emptied := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "wrong chat"})
			at := time.Now().Add(-time.Minute).Truncate(time.Microsecond)
			if tc.drop != "" {
				f.DropColumn("message", tc.drop)
			} else {
				f.Exec("UPDATE message SET message_summary_info = x'62706c6973743030ff'")
			}
			f.Exec("UPDATE message SET text = NULL, attributedBody = NULL, date_retracted = ?, date_edited = ? WHERE guid = ?",
				chatdbtest.AppleNanos(at), chatdbtest.AppleNanos(at), retracted)
			f.Exec("UPDATE message SET text = NULL, attributedBody = NULL, date_edited = ? WHERE guid = ?", chatdbtest.AppleNanos(at), emptied)
			db := open(t, f)

			r := byGUID(t, db, retracted)
			if when, unsent := r.Unsent(); !unsent || !when.Equal(at) || r.UnsentParts() != nil {
				t.Errorf("date_retracted: Unsent() = %v, %v; UnsentParts() = %v", when, unsent, r.UnsentParts())
			}
			r = byGUID(t, db, emptied)
			if when, unsent := r.Unsent(); unsent || r.UnsentParts() != nil {
				t.Errorf("an emptied edit: Unsent() = %v, %v; UnsentParts() = %v", when, unsent, r.UnsentParts())
			}
		})
	}
}
