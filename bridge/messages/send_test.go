package messages

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages/chatdb"
	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// sendRow is Messages writing a sent row of the line's into chat.
func sendRow(db *chatdbtest.Fixture, chat chatdbtest.ChatRef, text string) string {
	_, guid := db.Insert(chatdbtest.Msg{Chat: chat, Text: text, IsSent: true})
	return guid
}

func outgoing(conv bridge.Conversation, text string) bridge.Outgoing {
	return bridge.Outgoing{Conversation: conv, Text: text}
}

// A send is one script run; its row is found in the chat and followed
// until Messages marks it sent.
func TestSendFindsItsRow(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	var guid string
	marked := make(chan struct{})
	r.mac.answer(func(n int, c scriptCall) error {
		if scriptKind(c.script) != "text→chat" {
			return nil
		}
		// Messages writes the row, and marks it sent once it went out:
		// here, once the bridge follows it.
		_, guid = r.db.Insert(chatdbtest.Msg{Chat: dm, Text: c.args[1]})
		go func() {
			defer close(marked)
			deadline := time.Now().Add(rigWait)
			for !r.b.leaveToSender(chatdb.Row{GUID: guid}) && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			r.db.MarkSent(guid)
		}()
		return nil
	})
	handoffs := 0
	out := outgoing(conversation(dm.GUID, alice, false), "hello")
	out.Handoff = func(context.Context) error { handoffs++; return nil }
	rc, err := r.b.Send(t.Context(), out)
	<-marked
	if err != nil {
		t.Fatalf("Send: %v", err)
	}
	if rc.GUID != guid || rc.ChatGUID != dm.GUID || rc.Service != "imessage" || rc.SentAt.IsZero() || rc.SMSFallback {
		t.Errorf("receipt %+v, want GUID %s", rc, guid)
	}
	if handoffs != 1 {
		t.Errorf("Handoff called %d times", handoffs)
	}
	r.mac.checkKinds(t, "text→chat")
	if c := r.mac.recorded()[0]; !slices.Equal(c.args, []string{dm.GUID, "hello", "1"}) {
		t.Errorf("argv %q", c.args)
	}

	// A Handoff that fails stops the send before anything runs.
	r.mac.answer(nil)
	out.Handoff = func(context.Context) error { return errors.New("outbox closed") }
	if _, err := r.b.Send(t.Context(), out); err == nil || !strings.Contains(err.Error(), "outbox closed") {
		t.Fatalf("Send with a failing Handoff: %v", err)
	}
	r.mac.checkKinds(t)
	// An unknown service is refused before anything runs.
	conv := conversation(dm.GUID, alice, false)
	conv.Service = "carrier pigeon"
	if _, err := r.b.Send(t.Context(), outgoing(conv, "coo")); !bridge.IsPermanent(err) {
		t.Fatalf("Send on an unknown service: %v", err)
	}
	r.mac.checkKinds(t)
}

// A text Messages splits in two rows (around a link) is one send; the
// watcher reports neither row as sent from elsewhere.
func TestSendSplitText(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.start()
	var first, second string
	r.mac.answer(func(n int, c scriptCall) error {
		first = sendRow(r.db, dm, "Look at this:")
		second = sendRow(r.db, dm, "https://example.com/a?b=1")
		return nil
	})
	rc, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "Look at this: https://example.com/a?b=1"))
	if err != nil || rc.GUID != first {
		t.Fatalf("Send: %+v, %v; want the first row %s", rc, err, first)
	}
	r.sentinel(dm, alice)
	st := r.sink.state()
	for _, g := range []string{first, second} {
		if _, ok := findInbound(st.offered, g); ok {
			t.Errorf("our send's row %s reported as a message", g)
		}
	}
	r.mac.checkKinds(t, "text→chat")
}

// Messages accepted the send but no row appeared: the outcome is unknown,
// which is final; nothing is sent again.
func TestSendWithoutRowIsOutcomeUnknown(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.TextTimeout = 200 * time.Millisecond })
	dm := r.db.DirectChat("imessage", alice)
	_, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "into the void"))
	if !bridge.IsPermanent(err) || bridge.IsNotSent(err) || !errors.Is(err, errUnknownOutcome) || !strings.Contains(err.Error(), "not sent again") {
		t.Fatalf("Send: %v", err)
	}
	r.mac.checkKinds(t, "text→chat")

	// A row that appears but is never marked sent: unknown too.
	r.mac.answer(func(int, scriptCall) error { r.db.Insert(chatdbtest.Msg{Chat: dm, Text: "stuck"}); return nil })
	_, err = r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "stuck"))
	if !bridge.IsPermanent(err) || !errors.Is(err, errUnknownOutcome) || !strings.Contains(err.Error(), "did not confirm") {
		t.Fatalf("Send of a row never sent: %v", err)
	}
	r.mac.checkKinds(t, "text→chat")
}

// A chat Messages does not know (-1728) is addressed in its next form:
// the stored any; form, then the contact as a participant.
func TestSendFallsBackToTheNextTarget(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.db.ChatWithGUID("any;-;"+alice, "iMessage", alice)
	r.db.DirectChat("sms", alice) // another service: never a target
	r.mac.answer(func(n int, c scriptCall) error {
		if scriptKind(c.script) == "text→chat" {
			return notFound(`chat id "` + c.args[0] + `"`)
		}
		sendRow(r.db, dm, c.args[1])
		return nil
	})
	if _, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "by participant")); err != nil {
		t.Fatalf("Send: %v", err)
	}
	r.mac.checkKinds(t, "text→chat", "text→chat", "text→participant")
	calls := r.mac.recorded()
	if calls[0].args[0] != dm.GUID || calls[1].args[0] != "any;-;"+alice || !slices.Equal(calls[2].args[:3], []string{alice, "by participant", "iMessage"}) {
		t.Errorf("targets %q, %q, %q", calls[0].args, calls[1].args, calls[2].args)
	}

	// Refused in every form: certainly not sent, and final.
	r.mac.answer(func(n int, c scriptCall) error { return notFound("it") })
	_, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "nowhere"))
	if !bridge.IsNotSent(err) || !bridge.IsPermanent(err) || !errors.Is(err, ErrChatNotFound) {
		t.Fatalf("Send refused everywhere: %v", err)
	}
	r.mac.checkKinds(t, "text→chat", "text→chat", "text→participant")

	// A group has no participant form.
	group := r.db.GroupChat("imessage", "", alice, bob)
	r.mac.forget()
	_, err = r.b.Send(t.Context(), outgoing(conversation(group.GUID, group.Identifier, true), "all"))
	if !bridge.IsNotSent(err) {
		t.Fatalf("group send refused: %v", err)
	}
	r.mac.checkKinds(t, "text→chat")
}

// Messages not running is launched, and the send made again; a -1728
// just after the launch is Messages still loading its chats.
func TestSendLaunchesMessages(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	var guid string
	r.mac.answer(func(n int, c scriptCall) error {
		switch n {
		case 0:
			return scriptFailure(scriptErrNotRunning)
		case 3:
			return notFound("chat")
		case 4:
			guid = sendRow(r.db, dm, c.args[1])
		}
		return nil
	})
	rc, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "wake up"))
	if err != nil || rc.GUID != guid {
		t.Fatalf("Send: %+v, %v", rc, err)
	}
	r.mac.checkKinds(t, "text→chat", "launch", "ping", "text→chat", "text→chat")
	for _, i := range []int{0, 3, 4} {
		if got := r.mac.recorded()[i].args[0]; got != dm.GUID {
			t.Errorf("run %d addressed %q", i, got)
		}
	}
	if !strings.Contains(r.logs.String(), "chat not found just after Messages launched") {
		t.Errorf("log:\n%s", r.logs)
	}

	// A launch that fails: certainly not sent.
	r.b.launchedAt = time.Time{}
	r.mac.answer(func(n int, c scriptCall) error {
		if n == 0 {
			return scriptFailure(scriptErrNotRunning)
		}
		return errors.New("launch failed")
	})
	if _, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "x")); !bridge.IsNotSent(err) ||
		!strings.Contains(err.Error(), "launch Messages") {
		t.Fatalf("Send with a failing launch: %v", err)
	}
	r.mac.checkKinds(t, "text→chat", "launch")
}

// Messages launched that never answers: the launch fails after LaunchWait.
func TestSendLaunchNotAnswering(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.LaunchWait = 100 * time.Millisecond })
	dm := r.db.DirectChat("imessage", alice)
	r.mac.answer(func(n int, c scriptCall) error {
		if k := scriptKind(c.script); k == "text→chat" || k == "ping" {
			return scriptFailure(scriptErrNotRunning)
		}
		return nil
	})
	_, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "x"))
	if !bridge.IsNotSent(err) || !strings.Contains(err.Error(), "did not answer within") {
		t.Fatalf("Send: %v", err)
	}
	if k := r.mac.kinds(); len(k) < 3 || !slices.Equal(k[:3], []string{"text→chat", "launch", "ping"}) || slices.Contains(k[1:], "text→chat") {
		t.Fatalf("runs %q", k)
	}
}

// A send that times out: when Messages answers a ping it was only slow
// (the row decides); when it does not, it is quit and launched again, and
// the send made once more only if chat.db shows nothing of it.
func TestSendRelaunchesAHungMessages(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.TextTimeout = 300 * time.Millisecond })
	dm := r.db.DirectChat("imessage", alice)
	timedOut := scriptFailure(scriptErrTimedOut)

	t.Run("slow", func(t *testing.T) {
		var guid string
		r.mac.answer(func(n int, c scriptCall) error {
			if n == 0 {
				guid = sendRow(r.db, dm, c.args[1])
				return timedOut
			}
			return nil
		})
		rc, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "slow"))
		if err != nil || rc.GUID != guid {
			t.Fatalf("Send: %+v, %v", rc, err)
		}
		r.mac.checkKinds(t, "text→chat", "ping")
	})
	t.Run("hung, and the send died with it", func(t *testing.T) {
		var guid string
		r.mac.answer(func(n int, c scriptCall) error {
			switch n {
			case 0, 1:
				return timedOut
			case 5:
				guid = sendRow(r.db, dm, c.args[1])
			}
			return nil
		})
		rc, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "again"))
		if err != nil || rc.GUID != guid {
			t.Fatalf("Send: %+v, %v", rc, err)
		}
		r.mac.checkKinds(t, "text→chat", "ping", "quit", "launch", "ping", "text→chat")
	})
	t.Run("hung, and the send went out before", func(t *testing.T) {
		var guid string
		r.mac.answer(func(n int, c scriptCall) error {
			switch n {
			case 0:
				guid = sendRow(r.db, dm, c.args[1])
				return timedOut
			case 1:
				return timedOut
			}
			return nil
		})
		rc, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "once"))
		if err != nil || rc.GUID != guid {
			t.Fatalf("Send: %+v, %v", rc, err)
		}
		r.mac.checkKinds(t, "text→chat", "ping", "quit", "launch", "ping")
	})
	t.Run("hung, and the relaunch fails", func(t *testing.T) {
		r.mac.answer(func(n int, c scriptCall) error {
			if n == 2 {
				return errors.New("cannot quit")
			}
			return timedOut
		})
		_, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "lost"))
		if !bridge.IsPermanent(err) || !errors.Is(err, errUnknownOutcome) || !strings.Contains(err.Error(), "relaunching Messages failed") {
			t.Fatalf("Send: %v", err)
		}
		r.mac.checkKinds(t, "text→chat", "ping", "quit")
	})
}

// A script that fails for an unknown reason may have sent: the row
// decides. One refused before it ran certainly did not.
func TestSendUnknownFailure(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.TextTimeout = 200 * time.Millisecond })
	dm := r.db.DirectChat("imessage", alice)
	var guid string
	r.mac.answer(func(n int, c scriptCall) error {
		guid = sendRow(r.db, dm, c.args[1])
		return &ScriptError{ExitCode: 1, Stderr: "something odd"}
	})
	if rc, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "odd")); err != nil || rc.GUID != guid {
		t.Fatalf("Send: %+v, %v", rc, err)
	}
	r.mac.answer(func(int, scriptCall) error { return &ScriptError{ExitCode: 1, Stderr: "something odd"} })
	_, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "odd again"))
	if !bridge.IsPermanent(err) || bridge.IsNotSent(err) || !errors.Is(err, errUnknownOutcome) || !strings.Contains(err.Error(), "something odd") {
		t.Fatalf("Send with no row: %v", err)
	}
	r.mac.checkKinds(t, "text→chat")
	r.mac.answer(func(int, scriptCall) error { return scriptFailure(scriptErrParam) })
	if _, err = r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "refused")); !bridge.IsNotSent(err) {
		t.Fatalf("refused Send: %v", err)
	}
	r.mac.checkKinds(t, "text→chat")
}

// Automation denied: nothing reached Messages, and the line is
// unavailable until the owner allows it; later sends do not even try to
// send (without the watchdog, as here, they ping first).
func TestSendAutomationDenied(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.mac.answer(func(int, scriptCall) error { return scriptFailure(scriptErrNotPermitted) })
	_, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "hi"))
	pause, unavailable := bridge.IsUnavailable(err)
	if !unavailable || pause != time.Second || !bridge.IsNotSent(err) || !errors.Is(err, ErrAutomationDenied) {
		t.Fatalf("Send: %v (unavailable %v, %s)", err, unavailable, pause)
	}
	_, err = r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "hi again"))
	if _, unavailable := bridge.IsUnavailable(err); !unavailable || !strings.Contains(err.Error(), "Automation permission denied") {
		t.Fatalf("second Send: %v", err)
	}
	r.mac.checkKinds(t, "text→chat", "ping")
	if h := r.b.Health(); h.Automation != "denied" {
		t.Errorf("health %+v", h)
	}
}

// A one-to-one iMessage the recipient cannot get (error 22, never sent)
// goes out once more as SMS when the line allows it.
func TestSendSMSFallback(t *testing.T) {
	t.Parallel()
	for _, fallback := range []bool{true, false} {
		t.Run(map[bool]string{true: "on", false: "off"}[fallback], func(t *testing.T) {
			r := newRig(t, func(c *Config) { c.SMSFallback = fallback })
			dm := r.db.DirectChat("imessage", alice)
			sms := r.db.DirectChat("sms", alice)
			var smsGUID string
			r.mac.answer(func(n int, c scriptCall) error {
				switch c.args[0] {
				case dm.GUID:
					r.db.Insert(chatdbtest.Msg{Chat: dm, Text: c.args[1], Error: errNotDelivered})
				case sms.GUID:
					smsGUID = sendRow(r.db, sms, c.args[1])
				}
				return nil
			})
			rc, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "are you there"))
			if fallback {
				defer func() {
					// An SMS fallback that fails says so.
					r.mac.answer(func(n int, c scriptCall) error {
						if c.args[0] == dm.GUID {
							r.db.Insert(chatdbtest.Msg{Chat: dm, Text: c.args[1], Error: errNotDelivered})
							return nil
						}
						return notFound("it")
					})
					_, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "still there?"))
					if !bridge.IsNotSent(err) || !strings.Contains(err.Error(), "the SMS fallback failed") {
						t.Errorf("failed SMS fallback: %v", err)
					}
					r.mac.checkKinds(t, "text→chat", "text→chat", "text→participant")
				}()
			}
			if !fallback {
				var failed *sendFailedError
				if !bridge.IsPermanent(err) || !errors.As(err, &failed) || !strings.Contains(err.Error(), `"Not Delivered"`) {
					t.Fatalf("Send: %v", err)
				}
				r.mac.checkKinds(t, "text→chat")
				return
			}
			if err != nil || rc.GUID != smsGUID || !rc.SMSFallback || rc.Service != "sms" || rc.ChatGUID != sms.GUID {
				t.Fatalf("Send: %+v, %v", rc, err)
			}
			r.mac.checkKinds(t, "text→chat", "text→chat")
			if got := r.mac.recorded()[1].args[0]; got != sms.GUID {
				t.Errorf("fallback addressed %q", got)
			}
		})
	}
}

// An SMS conversation goes on where the contact last wrote: in RCS when
// that chat is the newest.
func TestSendSMSGoesWhereTheContactWrote(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	r.db.DirectChat("sms", alice)
	rcs := r.db.DirectChat("rcs", alice)
	r.db.Insert(chatdbtest.Msg{Chat: rcs, From: alice, Text: "from my Android"})
	var guid string
	r.mac.answer(func(n int, c scriptCall) error {
		guid = sendRow(r.db, rcs, c.args[1])
		return nil
	})
	rc, err := r.b.Send(t.Context(), outgoing(conversation("SMS;-;"+alice, alice, false), "hi"))
	if err != nil || rc.GUID != guid || rc.Service != "rcs" {
		t.Fatalf("Send: %+v, %v", rc, err)
	}
	if got := r.mac.recorded()[0].args[0]; got != rcs.GUID {
		t.Errorf("addressed %q, want %q", got, rcs.GUID)
	}
}

// A file is staged where Messages may read it, under its own name, sent,
// found by that name, and its staged copy removed.
func TestSendFile(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	src := writeFile(t, t.TempDir(), "source.bin", "JPEG DATA")
	var staged, textGUID, fileGUID string
	r.mac.answer(func(n int, c scriptCall) error {
		switch scriptKind(c.script) {
		case "text→chat":
			textGUID = sendRow(r.db, dm, c.args[1])
		case "file→chat":
			staged = c.args[1]
			if b, err := os.ReadFile(staged); err != nil || string(b) != "JPEG DATA" {
				t.Errorf("staged file: %q, %v", b, err)
			}
			_, fileGUID = r.db.Insert(chatdbtest.Msg{Chat: dm, IsSent: true,
				Attachments: []chatdbtest.FileSpec{{Path: staged, TransferName: filepath.Base(staged), MimeType: "image/jpeg"}}})
		}
		return nil
	})
	out := outgoing(conversation(dm.GUID, alice, false), "")
	out.Attachment = &bridge.File{Path: src, Filename: "photo.jpg", MimeType: "image/jpeg"}
	rc, err := r.b.Send(t.Context(), out)
	if err != nil || rc.GUID != fileGUID {
		t.Fatalf("Send: %+v, %v", rc, err)
	}
	if filepath.Base(staged) != "photo.jpg" || !strings.HasPrefix(staged, r.cfg.AttachmentsDir+string(filepath.Separator)) {
		t.Errorf("staged at %q", staged)
	}
	if _, err := os.Stat(filepath.Dir(staged)); !os.IsNotExist(err) {
		t.Errorf("staged folder left behind: %v", err)
	}
	r.mac.checkKinds(t, "file→chat")

	// Text and file: the receipt is the text's.
	out.Text = "look"
	out.Attachment.Filename = "../sneaky/name.jpg"
	r.mac.forget()
	if rc, err := r.b.Send(t.Context(), out); err != nil || rc.GUID != textGUID {
		t.Fatalf("Send: %+v, %v (text %s)", rc, err, textGUID)
	}
	r.mac.checkKinds(t, "text→chat", "file→chat")
	if filepath.Base(staged) != "attachment" {
		t.Errorf("a file name with a path staged as %q", staged)
	}

	// The text went out, the file did not: final, or the text repeats.
	r.mac.answer(func(n int, c scriptCall) error {
		if scriptKind(c.script) == "text→chat" {
			sendRow(r.db, dm, c.args[1])
			return nil
		}
		return notFound("it")
	})
	out.Text = "and this"
	if _, err := r.b.Send(t.Context(), out); !bridge.IsPermanent(err) || !strings.Contains(err.Error(), "the text was sent") {
		t.Fatalf("Send: %v", err)
	}

	// A file that cannot be read is not sent at all.
	r.mac.answer(nil)
	out.Attachment.Path = filepath.Join(t.TempDir(), "gone")
	if _, err := r.b.Send(t.Context(), out); err == nil || !strings.Contains(err.Error(), "stage attachment") {
		t.Fatalf("Send of a missing file: %v", err)
	}
	r.mac.checkKinds(t)
}

// A send handed to Messages before the daemon stopped is only looked for,
// never made again.
func TestSendResumes(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.TextTimeout, c.FileTimeout = 200*time.Millisecond, 200*time.Millisecond })
	dm := r.db.DirectChat("imessage", alice)
	handed := time.Now()
	guid := sendRow(r.db, dm, "sent before the stop")
	_, fileGUID := r.db.Insert(chatdbtest.Msg{Chat: dm, IsSent: true,
		Attachments: []chatdbtest.FileSpec{{Path: "/x/photo.jpg", TransferName: "photo.jpg"}}})

	out := outgoing(conversation(dm.GUID, alice, false), "sent before the stop")
	out.HandedAt = handed
	out.Attachment = &bridge.File{Path: "/gone", Filename: "photo.jpg"}
	rc, err := r.b.Send(t.Context(), out)
	if err != nil || rc.GUID != guid {
		t.Fatalf("resumed: %+v, %v", rc, err)
	}
	out.Text = ""
	if rc, err := r.b.Send(t.Context(), out); err != nil || rc.GUID != fileGUID {
		t.Fatalf("resumed file: %+v, %v", rc, err)
	}
	out = outgoing(conversation(dm.GUID, alice, false), "never written")
	out.HandedAt = handed
	if _, err := r.b.Send(t.Context(), out); !bridge.IsPermanent(err) || !errors.Is(err, errUnknownOutcome) {
		t.Fatalf("resumed send with no row: %v", err)
	}
	r.mac.checkKinds(t)
}

// fakeHelper is a helper peer that answers the bridge's requests with its
// handler, which may write to chat.db as Messages would.
type fakeHelper struct {
	peer    *helperPeer
	mu      sync.Mutex
	frames  []map[string]any
	handled int
	handler func(f map[string]any) map[string]any
}

// serveHelper connects a fake helper to h. A request is answered with
// what handler returns (nil: {}); a notification is only recorded.
func serveHelper(t *testing.T, h *HelperServer, handler func(f map[string]any) map[string]any) *fakeHelper {
	t.Helper()
	fh := &fakeHelper{peer: connectPeer(t, h), handler: handler}
	waitConnected(t, h, true)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			f, _, err := fh.peer.readFrame()
			if err != nil {
				return
			}
			fh.mu.Lock()
			fh.frames = append(fh.frames, f)
			handle := fh.handler
			fh.mu.Unlock()
			if id, _ := f["transactionId"].(string); id != "" {
				var ans map[string]any
				if handle != nil {
					ans = handle(f)
				}
				msg := map[string]any{"transactionId": id}
				for k, v := range ans {
					msg[k] = v
				}
				// Not peer.send: a failed write must not fail the test
				// from this goroutine.
				b, _ := json.Marshal(msg)
				fh.peer.conn.Write(append(b, '\r', '\n'))
			}
			fh.mu.Lock()
			fh.handled++
			fh.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		fh.peer.conn.Close()
		<-done
	})
	return fh
}

// seen waits until the helper has handled n frames since the last call,
// and returns them: what its handler wrote to chat.db is then the test's.
func (fh *fakeHelper) seen(t *testing.T, n int) []map[string]any {
	t.Helper()
	waitUntil(t, func() bool {
		fh.mu.Lock()
		defer fh.mu.Unlock()
		return fh.handled >= n
	})
	fh.mu.Lock()
	defer fh.mu.Unlock()
	out := fh.frames
	if len(out) != n {
		t.Fatalf("the helper got %d frames, want %d: %v", len(out), n, out)
	}
	fh.frames, fh.handled = nil, 0
	return out
}

func (fh *fakeHelper) answer(handler func(f map[string]any) map[string]any) {
	fh.mu.Lock()
	defer fh.mu.Unlock()
	fh.handler = handler
}

func frameData(f map[string]any) map[string]any {
	d, _ := f["data"].(map[string]any)
	return d
}

// Threaded replies and voice memos go through the helper, which names the
// new row; a chat it does not know under one GUID is tried in its next
// form.
func TestSendThroughTheHelper(t *testing.T) {
	t.Parallel()
	r := newRig(t, func(c *Config) { c.TextTimeout = 300 * time.Millisecond })
	dm := r.db.DirectChat("imessage", alice)
	fh := serveHelper(t, r.b.helper, nil)
	fh.answer(func(f map[string]any) map[string]any {
		d := frameData(f)
		if d["chatGuid"] == dm.GUID {
			return map[string]any{"error": "Chat does not exist!"}
		}
		guid := "HELPER-" + f["action"].(string)
		r.db.Insert(chatdbtest.Msg{Chat: dm, GUID: guid, Text: "whatever the helper sent", IsSent: true})
		return map[string]any{"identifier": guid}
	})
	out := outgoing(conversation(dm.GUID, alice, false), "yes")
	out.ReplyToGUID = "TARGET-1"
	rc, err := r.b.Send(t.Context(), out)
	frames := fh.seen(t, 2)
	if err != nil || rc.GUID != "HELPER-send-message" || rc.ChatGUID != dm.GUID {
		t.Fatalf("reply: %+v, %v", rc, err)
	}
	if a, b := frameData(frames[0]), frameData(frames[1]); a["chatGuid"] != dm.GUID || b["chatGuid"] != "any;-;"+alice ||
		b["selectedMessageGuid"] != "TARGET-1" || b["message"] != "yes" {
		t.Errorf("frames %v", frames)
	}

	memo := writeFile(t, t.TempDir(), "memo.caf", "caf")
	out = outgoing(conversation(dm.GUID, alice, false), "")
	out.Attachment, out.IsAudioMessage = &bridge.File{Path: memo, Filename: "Audio Message.caf"}, true
	rc, err = r.b.Send(t.Context(), out)
	frames = fh.seen(t, 2)
	if err != nil || rc.GUID != "HELPER-send-attachment" {
		t.Fatalf("voice memo: %+v, %v", rc, err)
	}
	if d := frameData(frames[1]); d["isAudioMessage"] != float64(1) || filepath.Base(d["filePath"].(string)) != "Audio Message.caf" {
		t.Errorf("voice memo frame %v", frames[1])
	}
	r.mac.checkKinds(t)

	// The helper names a message that never shows in chat.db.
	fh.answer(func(f map[string]any) map[string]any { return map[string]any{"identifier": "NEVER-WRITTEN"} })
	out = outgoing(conversation(dm.GUID, alice, false), "lost")
	out.ReplyToGUID = "TARGET-1"
	if _, err := r.b.Send(t.Context(), out); !bridge.IsPermanent(err) || !errors.Is(err, errUnknownOutcome) {
		t.Fatalf("a send the helper named but chat.db never shows: %v", err)
	}
	fh.seen(t, 1)
}

// Without the helper a voice memo waits for it; a reply goes out
// unthreaded. So does a reply on macOS 26 to a helper that does not
// declare threaded replies.
func TestSendWithoutTheHelper(t *testing.T) {
	t.Parallel()
	r := newRig(t)
	dm := r.db.DirectChat("imessage", alice)
	r.mac.answer(func(n int, c scriptCall) error { sendRow(r.db, dm, c.args[1]); return nil })
	out := outgoing(conversation(dm.GUID, alice, false), "")
	out.Attachment, out.IsAudioMessage = &bridge.File{Path: writeFile(t, t.TempDir(), "m.caf", "caf"), Filename: "m.caf"}, true
	if _, err := r.b.Send(t.Context(), out); !bridge.IsNotSent(err) || bridge.IsPermanent(err) {
		t.Fatalf("voice memo without the helper: %v", err)
	}
	r.mac.checkKinds(t)

	reply := outgoing(conversation(dm.GUID, alice, false), "unthreaded")
	reply.ReplyToGUID = "TARGET-1"
	if _, err := r.b.Send(t.Context(), reply); err != nil {
		t.Fatalf("reply without the helper: %v", err)
	}
	r.mac.checkKinds(t, "text→chat")

	r.b.cfg.MacOSVersion = "26.1"
	fh := serveHelper(t, r.b.helper, nil)
	r.mac.answer(func(n int, c scriptCall) error { sendRow(r.db, dm, c.args[1]); return nil })
	if _, err := r.b.Send(t.Context(), reply); err != nil {
		t.Fatalf("reply on macOS 26: %v", err)
	}
	r.mac.checkKinds(t, "text→chat")
	fh.seen(t, 0)
	if n := strings.Count(r.logs.String(), "reply sent unthreaded"); n != 2 {
		t.Errorf("%d unthreaded replies logged, want 2", n)
	}
}

// With the watchdog off (watchdog = false, PingEvery < 0), a line once found
// down (Automation denied, or a prompt pending) is pinged by the next send
// before it is refused: once the owner allows Automation, that send goes out.
func TestSendRecoversWithoutTheWatchdog(t *testing.T) {
	r := newRig(t) // PingEvery -1: the watchdog is off
	dm := r.db.DirectChat("imessage", alice)
	r.mac.answer(func(int, scriptCall) error { return scriptFailure(scriptErrNotPermitted) })
	if _, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "hi")); !errors.Is(err, ErrAutomationDenied) {
		t.Fatalf("Send: %v", err)
	}
	// Still denied: refused as unavailable, after a ping.
	if _, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "hi")); !isUnavailable(err) {
		t.Fatalf("Send while denied: %v", err)
	}
	// The owner allows Automation: the next send pings, finds the line up,
	// and goes out.
	r.mac.answer(func(n int, c scriptCall) error {
		if len(c.args) > 1 {
			sendRow(r.db, dm, c.args[1])
		}
		return nil
	})
	if _, err := r.b.Send(t.Context(), outgoing(conversation(dm.GUID, alice, false), "hi")); err != nil {
		t.Fatalf("Send after Automation was allowed: %v (runs %q)", err, r.mac.kinds())
	}
}

func isUnavailable(err error) bool {
	_, ok := bridge.IsUnavailable(err)
	return ok
}
