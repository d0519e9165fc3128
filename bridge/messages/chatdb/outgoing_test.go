package chatdb_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// TestFindOutgoingAnyChatOfTheContact checks that a send to a contact is
// found whichever chat of that contact Messages files it under, or under
// none, and only after the mark.
func TestFindOutgoingAnyChatOfTheContact(t *testing.T) {
	start := time.Now().Add(-time.Minute)
	tests := []struct {
		name string
		// insert files "hello there" and returns its GUID; it may insert
		// other rows before it.
		insert func(f *chatdbtest.Fixture) string
		// chatGUID and rawGUID are the chat the found row reports ("" for
		// none).
		chatGUID, rawGUID string
	}{
		{
			name: "the iMessage chat",
			insert: func(f *chatdbtest.Fixture) string {
				_, g := f.Insert(chatdbtest.Msg{Chat: f.DirectChat("iMessage", alice), Text: "Hello there"})
				return g
			},
			chatGUID: "iMessage;-;" + alice, rawGUID: "iMessage;-;" + alice,
		},
		{
			name: "the SMS chat of the same handle",
			insert: func(f *chatdbtest.Fixture) string {
				_, g := f.Insert(chatdbtest.Msg{Chat: f.DirectChat("sms", alice), Text: "Hello there"})
				return g
			},
			chatGUID: "SMS;-;" + alice, rawGUID: "SMS;-;" + alice,
		},
		{
			name: "a chat stored as any;-;",
			insert: func(f *chatdbtest.Fixture) string {
				_, g := f.Insert(chatdbtest.Msg{Chat: f.ChatWithGUID("any;-;"+alice, "iMessage", alice), Text: "Hello there"})
				return g
			},
			chatGUID: "iMessage;-;" + alice, rawGUID: "any;-;" + alice,
		},
		{
			name: "a chat stored as any;-; under another case",
			insert: func(f *chatdbtest.Fixture) string {
				_, g := f.Insert(chatdbtest.Msg{Chat: f.ChatWithGUID("any;-;"+strings.ToUpper(bob), "iMessage", bob), Text: "Hello there"})
				return g
			},
			chatGUID: "iMessage;-;" + strings.ToUpper(bob), rawGUID: "any;-;" + strings.ToUpper(bob),
		},
		{
			name: "no chat, the contact's handle",
			insert: func(f *chatdbtest.Fixture) string {
				_, g := f.Insert(chatdbtest.Msg{HandleOf: alice, Text: "Hello there"})
				return g
			},
		},
		{
			name: "no chat, the contact's SMS handle",
			insert: func(f *chatdbtest.Fixture) string {
				_, g := f.Insert(chatdbtest.Msg{HandleOf: alice, Chat: chatdbtest.ChatRef{Service: "SMS"}, Text: "Hello there"})
				return g
			},
		},
		{
			name: "in two chats of the contact, found once",
			insert: func(f *chatdbtest.Fixture) string {
				_, g := f.Insert(chatdbtest.Msg{Chat: f.DirectChat("iMessage", alice), Text: "Hello there"})
				f.AddToChat(g, f.DirectChat("SMS", alice))
				return g
			},
			chatGUID: "iMessage;-;" + alice, rawGUID: "iMessage;-;" + alice,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := chatdbtest.New(t, t.TempDir())
			// Rows of others, and of ours before the mark, with the same
			// text.
			f.Insert(chatdbtest.Msg{Chat: f.DirectChat("iMessage", carol), Text: "Hello there"})
			f.Insert(chatdbtest.Msg{Chat: f.DirectChat("SMS", carol), Text: "Hello there"})
			f.Insert(chatdbtest.Msg{HandleOf: carol, Text: "Hello there"})
			f.Insert(chatdbtest.Msg{Chat: f.DirectChat("iMessage", alice), From: alice, Text: "Hello there"})
			f.Insert(chatdbtest.Msg{HandleOf: alice, Text: "Hello there", Date: start.Add(-time.Hour)})
			mark, _ := f.Insert(chatdbtest.Msg{HandleOf: alice, Text: "Hello there"})
			g := tt.insert(f)
			ident := alice
			if strings.Contains(tt.name, "another case") {
				ident = bob
			}
			db := open(t, f)
			rs, err := db.FindOutgoing(context.Background(), chatdb.Outgoing{Identifier: ident, After: mark, Since: start, Text: "Hello, there!"})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) != 1 || rs[0].GUID != g {
				t.Fatalf("found %+v, want only %s", rs, g)
			}
			if rs[0].Chat.GUID != tt.chatGUID || rs[0].Chat.RawGUID != tt.rawGUID {
				t.Errorf("chat GUID %q (raw %q), want %q (raw %q)", rs[0].Chat.GUID, rs[0].Chat.RawGUID, tt.chatGUID, tt.rawGUID)
			}
			// After the row itself: nothing.
			last, err := db.MaxRowID(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if got := outgoing(t, db, chatdb.Outgoing{Identifier: ident, After: last, Since: start, Text: "Hello there"}); got != nil {
				t.Errorf("after the row: found %v", got)
			}
			// Someone else: nothing after the mark.
			if got := outgoing(t, db, chatdb.Outgoing{Identifier: "+15550000000", After: mark, Text: "Hello there"}); got != nil {
				t.Errorf("another contact: found %v", got)
			}
		})
	}
}

func TestFindOutgoingGroup(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	group := f.GroupChat("iMessage", "Team", alice, bob)
	dm := f.DirectChat("iMessage", alice)
	// A row of ours under no chat whose handle is alice, one whose handle
	// is named like the group, and one in alice's chat.
	f.Insert(chatdbtest.Msg{HandleOf: alice, Text: "to the team"})
	f.Insert(chatdbtest.Msg{HandleOf: group.Identifier, Text: "to the team"})
	_, inDM := f.Insert(chatdbtest.Msg{Chat: dm, Text: "to the team"})
	db := open(t, f)
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: group.Identifier, IsGroup: true, Text: "to the team"}); got != nil {
		t.Errorf("group: found %v, want nothing (rows under no chat do not count for a group)", got)
	}
	// IsGroup alone turns the handle rule off.
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: alice, IsGroup: true, Text: "to the team"}); !slices.Equal(got, []string{inDM}) {
		t.Errorf("alice as a group: found %v, want only the row in her chat %s", got, inDM)
	}

	// A row of ours in the group whose handle is alice is not hers.
	mark, _ := f.Insert(chatdbtest.Msg{Chat: group, HandleOf: alice, Text: "for the group"})
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: alice, Text: "for the group"}); got != nil {
		t.Errorf("alice: found %v, a row of the group", got)
	}
	_, g := f.Insert(chatdbtest.Msg{Chat: group, Text: "for the group"})
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: group.Identifier, IsGroup: true, After: mark, Text: "for the group"}); !slices.Equal(got, []string{g}) {
		t.Errorf("group: found %v, want %s", got, g)
	}
	// The group stored as any;+;.
	anyGroup := f.ChatWithGUID("any;+;chat900000000000000001", "iMessage", alice, bob)
	_, g = f.Insert(chatdbtest.Msg{Chat: anyGroup, Text: "for the group"})
	rs, err := db.FindOutgoing(context.Background(), chatdb.Outgoing{Identifier: anyGroup.Identifier, IsGroup: true, Text: "for the group"})
	if err != nil || len(rs) != 1 || rs[0].GUID != g || rs[0].Chat.GUID != "iMessage;+;chat900000000000000001" ||
		rs[0].Chat.RawGUID != "any;+;chat900000000000000001" || !rs[0].Chat.IsGroup {
		t.Errorf("any;+; group: found %+v, %v", rs, err)
	}
}

func TestFindOutgoingSplitText(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	mark, _ := f.Insert(chatdbtest.Msg{Chat: chat, Text: "Look at this"})
	_, first := f.Insert(chatdbtest.Msg{Chat: chat, Text: "Look at this"})
	// Between the parts: a reply of alice's and a row of ours elsewhere.
	f.Insert(chatdbtest.Msg{Chat: chat, From: alice, Text: "https://example.com/a?b=1"})
	f.Insert(chatdbtest.Msg{Chat: f.DirectChat("iMessage", bob), Text: "https://example.com/a?b=1"})
	_, second := f.Insert(chatdbtest.Msg{Chat: chat, Text: "https://example.com/a?b=1", Ventura: true})
	db := open(t, f)
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: alice, After: mark, Text: "Look at this https://example.com/a?b=1"}); !slices.Equal(got, []string{first, second}) {
		t.Errorf("split text: found %v, want %v", got, []string{first, second})
	}
	// Only one of the parts sent: no match.
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: alice, After: mark, Text: "Look at this https://example.com/a?b=2"}); got != nil {
		t.Errorf("other link: found %v", got)
	}
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: alice, After: mark, Text: "Look at this, and this: https://example.com/a?b=1"}); got != nil {
		t.Errorf("text with more words: found %v", got)
	}
	// The link alone.
	if got := outgoing(t, db, chatdb.Outgoing{Identifier: alice, After: mark, Text: "https://example.com/a?b=1"}); !slices.Equal(got, []string{second}) {
		t.Errorf("the link alone: found %v, want %s", got, second)
	}
}

func TestFindOutgoingUnicodeForms(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	chat := f.DirectChat("iMessage", alice)
	_, nfd := f.Insert(chatdbtest.Msg{Chat: chat, Text: "Cafe\u0301 au lait"})
	_, nfc := f.Insert(chatdbtest.Msg{Chat: chat, Text: "Noël"})
	_, dash := f.Insert(chatdbtest.Msg{Chat: chat, Text: "It’s 9–5 — “fine”"})
	db := open(t, f)
	for _, tc := range []struct {
		text string
		want []string
	}{
		{"Café au lait", []string{nfd}},
		{"Cafe\u0301 au lait", []string{nfd}},
		{"Noe\u0308l", []string{nfc}},
		{"Noël", []string{nfc}},
		{"It's 9-5 - \"fine\"", []string{dash}},
		{"Cafe au lait", nil},
		{"Noel", nil},
	} {
		if got := outgoing(t, db, chatdb.Outgoing{Identifier: alice, Text: tc.text}); !slices.Equal(got, tc.want) {
			t.Errorf("%q: found %v, want %v", tc.text, got, tc.want)
		}
	}
}

func TestCanonicalGUID(t *testing.T) {
	for _, tc := range []struct {
		guid, service, want string
	}{
		{"any;-;+15551230001", "iMessage", "iMessage;-;+15551230001"},
		{"any;-;+15551230001", "SMS", "SMS;-;+15551230001"},
		{"any;-;+15551230001", "RCS", "RCS;-;+15551230001"},
		{"any;-;+15551230001", "", "iMessage;-;+15551230001"},
		{"any;-;+15551230001", "any", "iMessage;-;+15551230001"},
		{"any;+;chat123", "iMessage", "iMessage;+;chat123"},
		{"any;+;chat123", "", "iMessage;+;chat123"},
		{"iMessage;-;x", "SMS", "iMessage;-;x"},
		{"iMessage;-;x", "", "iMessage;-;x"},
		{"SMS;-;x", "iMessage", "SMS;-;x"},
		{"SMS;-;x", "", "SMS;-;x"},
		{"RCS;-;x", "", "RCS;-;x"},
		{"", "iMessage", ""},
	} {
		if got := chatdb.CanonicalGUID(tc.guid, tc.service); got != tc.want {
			t.Errorf("CanonicalGUID(%q, %q) = %q, want %q", tc.guid, tc.service, got, tc.want)
		}
	}
	for service, want := range map[string]string{"iMessage": "iMessage", "SMS": "SMS", "sms": "SMS", "RCS": "RCS",
		"rcs": "RCS", "": "iMessage", "any": "iMessage"} {
		if got := chatdb.ServicePrefix(service); got != want {
			t.Errorf("ServicePrefix(%q) = %q, want %q", service, got, want)
		}
	}
}

// TestRowsChatStoredAsAny checks that rows of a chat macOS 26 stores as
// "any;-;X" name it by its service-prefixed GUID, and keep the stored one.
func TestRowsChatStoredAsAny(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	im := f.ChatWithGUID("any;-;"+alice, "iMessage", alice)
	sms := f.ChatWithGUID("any;-;"+carol, "SMS", carol)
	group := f.ChatWithGUID("any;+;chat900000000000000002", "iMessage", alice, bob)
	_, a := f.Insert(chatdbtest.Msg{Chat: im, From: alice, Text: "one"})
	_, c := f.Insert(chatdbtest.Msg{Chat: sms, From: carol, Text: "two"})
	_, g := f.Insert(chatdbtest.Msg{Chat: group, From: bob, Text: "three"})
	db := open(t, f)
	want := map[string]chatdb.Chat{
		a: {RowID: im.RowID, GUID: "iMessage;-;" + alice, RawGUID: "any;-;" + alice, Identifier: alice,
			Service: "imessage", Participants: []string{alice}},
		c: {RowID: sms.RowID, GUID: "SMS;-;" + carol, RawGUID: "any;-;" + carol, Identifier: carol,
			Service: "sms", Participants: []string{carol}},
		g: {RowID: group.RowID, GUID: "iMessage;+;chat900000000000000002", RawGUID: "any;+;chat900000000000000002",
			Identifier: "chat900000000000000002", IsGroup: true, Service: "imessage", Participants: []string{alice, bob}},
	}
	for guid, wantChat := range want {
		if r := byGUID(t, db, guid); !reflect.DeepEqual(r.Chat, wantChat) {
			t.Errorf("RowsByGUID chat:\n got %+v\nwant %+v", r.Chat, wantChat)
		}
	}
	for _, r := range rows(t, db, 0) {
		if !reflect.DeepEqual(r.Chat, want[r.GUID]) {
			t.Errorf("Rows chat:\n got %+v\nwant %+v", r.Chat, want[r.GUID])
		}
	}
}

func TestChatsByIdentifier(t *testing.T) {
	f := chatdbtest.New(t, t.TempDir())
	f.DirectChat("iMessage", alice)
	f.DirectChat("iMessage", bob)
	f.DirectChat("SMS", alice)
	f.ChatWithGUID("any;-;"+alice, "iMessage", alice)
	f.ChatWithGUID("any;-;"+strings.ToUpper(bob), "", bob)
	group := f.GroupChat("iMessage", "Team", alice, bob)
	db := open(t, f)
	ctx := context.Background()
	for _, tc := range []struct {
		identifier string
		want       []chatdb.StoredChat
	}{
		{alice, []chatdb.StoredChat{
			{GUID: "iMessage;-;" + alice, ServiceName: "iMessage"},
			{GUID: "SMS;-;" + alice, ServiceName: "SMS"},
			{GUID: "any;-;" + alice, ServiceName: "iMessage"},
		}},
		{"Bob@Example.com", []chatdb.StoredChat{
			{GUID: "iMessage;-;" + bob, ServiceName: "iMessage"},
			{GUID: "any;-;" + strings.ToUpper(bob), ServiceName: ""},
		}},
		{group.Identifier, []chatdb.StoredChat{{GUID: group.GUID, ServiceName: "iMessage"}}},
		{carol, nil},
	} {
		got, err := db.ChatsByIdentifier(ctx, tc.identifier)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ChatsByIdentifier(%q):\n got %+v\nwant %+v", tc.identifier, got, tc.want)
		}
	}
}
