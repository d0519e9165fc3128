package chatdb_test

import (
	"bytes"
	"context"
	"testing"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// TestBodyOnlyAttachments: a row whose three files are named only in its
// attributedBody, where the transfer GUID attribute's name is spelled out
// once and referred back to after (as Messages archives it), has all three.
func TestBodyOnlyAttachments(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, g := f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "first \uFFFC, then \uFFFC and \uFFFC!", Attachments: []chatdbtest.FileSpec{
		{Path: "~/Library/Messages/Attachments/a/b/c/one.jpeg", MimeType: "image/jpeg", TransferName: "one.jpeg", TotalBytes: 1, BodyOnly: true},
		{Path: "~/Library/Messages/Attachments/a/b/d/two.pdf", MimeType: "application/pdf", TransferName: "two.pdf", TotalBytes: 2, BodyOnly: true},
		{Path: "~/Library/Messages/Attachments/a/b/e/three.mov", MimeType: "video/quicktime", TransferName: "three.mov", TotalBytes: 3, BodyOnly: true},
	}})
	var joins int
	var body []byte
	if err := f.QueryRow("SELECT COUNT(*) FROM message_attachment_join").Scan(&joins); err != nil || joins != 0 {
		t.Fatalf("join rows = %d, %v; want none", joins, err)
	}
	if err := f.QueryRow("SELECT attributedBody FROM message WHERE guid = ?", g).Scan(&body); err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(body, []byte("__kIMFileTransferGUIDAttributeName")); n != 1 {
		t.Fatalf("the attribute name is spelled out %d times in the body, want once", n)
	}

	db := open(t, f)
	for _, read := range []func() chatdb.Row{
		func() chatdb.Row { return byGUID(t, db, g) },
		func() chatdb.Row {
			rows, err := db.Rows(context.Background(), 0, 10)
			if err != nil || len(rows) != 1 {
				t.Fatalf("Rows = %d rows, %v", len(rows), err)
			}
			return rows[0]
		},
	} {
		r := read()
		var names []string
		for _, a := range r.Attachments {
			names = append(names, a.TransferName)
		}
		if len(names) != 3 || names[0] != "one.jpeg" || names[1] != "two.pdf" || names[2] != "three.mov" ||
			r.Attachments[2].MimeType != "video/quicktime" || r.Attachments[2].TotalBytes != 3 {
			t.Errorf("attachments = %q (%+v), want one.jpeg, two.pdf, three.mov", names, r.Attachments)
		}
	}
}
