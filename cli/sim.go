package cli

import (
	"errors"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/client/api"
)

// simCommands lists the sim subcommands, for the usage errors.
const simCommands = "inbound, owner-send, reaction, typing, edit, unsend, read, group or availability"

func (a *app) simCommand() *cobra.Command {
	sim := group("sim", "Simulate contacts on a simulated line: messages, tapbacks, typing, edits, reads, group changes",
		"  blueline sim inbound --line +15550000000 --from +15551234567 --text hello\n  blueline sim typing --line +15550000000 --from +15551234567",
		simCommands)
	sim.AddCommand(
		a.simInboundCommand(), a.simOwnerSendCommand(), a.simReactionCommand(), a.simTypingCommand(), a.simEditCommand(),
		a.simUnsendCommand(), a.simReadCommand(), a.simGroupCommand(), a.simAvailabilityCommand(),
	)
	return sim
}

// simString is a string flag of a sim command.
type simString struct {
	p          *string
	name, help string
}

// simSpec is a sim command: what it posts to /sim/NAME (NAME is the first
// word of use) and the flags that fill it in.
type simSpec struct {
	use, short, long, example string
	needs                     []simString          // string flags the command cannot do without
	flags                     func(*pflag.FlagSet) // its other flags, if any
	check                     func() error         // what else must hold, once needs do; nil if nothing
	req                       any                  // a pointer to the request the flags fill in
}

// simPost makes a sim command: check the request, post it, print the answer.
func (a *app) simPost(s simSpec) *cobra.Command {
	name, _, _ := strings.Cut(s.use, " ")
	c := &cobra.Command{
		Use:     s.use,
		Short:   s.short,
		Long:    s.long,
		Example: s.example,
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := needsError("sim "+name, s.needs); err != nil {
				return err
			}
			if s.check != nil {
				if err := s.check(); err != nil {
					return err
				}
			}
			return a.adminPrint(cmd.Context(), http.MethodPost, "/sim/"+name, s.req)
		},
	}
	for _, f := range s.needs {
		c.Flags().StringVar(f.p, f.name, "", f.help)
	}
	if s.flags != nil {
		s.flags(c.Flags())
	}
	return c
}

// needsError is the usage error of command when one of needs is missing:
// it names them all, then those missing.
func needsError(command string, needs []simString) error {
	var names, missing []string
	for _, f := range needs {
		names = append(names, "--"+f.name)
		if *f.p == "" {
			missing = append(missing, "--"+f.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return usageErrorf("%s needs %s: %s", command, andList(names), isMissing(missing))
}

// andList is "a", "a and b", "a, b and c".
func andList(items []string) string {
	if len(items) < 2 {
		return strings.Join(items, "")
	}
	return strings.Join(items[:len(items)-1], ", ") + " and " + items[len(items)-1]
}

// isMissing says that flags are missing.
func isMissing(flags []string) string {
	if len(flags) == 1 {
		return flags[0] + " is missing"
	}
	return andList(flags) + " are missing"
}

func (a *app) simInboundCommand() *cobra.Command {
	var req api.SimInbound
	var participants string
	return a.simPost(simSpec{
		use:   "inbound --line HANDLE --from HANDLE [--text TEXT] [--attach PATH | --audio PATH [--transcription TEXT]] [--chat cht_… | --group NAME --participants a,b,c] [--late DURATION] [--unknown-sender]",
		short: "A simulated contact texts a line; prints the stored message as JSON",
		long: `A simulated contact texts a line, optionally with a file (a picture, a .vcf
contact card…) or a voice memo, and the stored message is printed as JSON.
--text may be left out when a file is sent. Without --transcription a voice
memo's transcription is null (not transcribed yet). --late sends it that long
ago, as news read late (its events say arrival catch_up past 10 minutes);
--unknown-sender files the contact's chat under Unknown Senders.`,
		example: `  blueline sim inbound --line +15550000000 --from +15551234567 --text hello
  blueline sim inbound --line +15550000000 --from +15551234567 --attach cat.jpg
  blueline sim inbound --line +15550000000 --from +15551234567 --audio memo.m4a --transcription "call me"
  blueline sim inbound --line +15550000000 --from +15551234567 --text hi --group Friends --participants +15551234567,+15557654321
  blueline sim inbound --line +15550000000 --from +15551234567 --text "still there?" --late 2h`,
		// Not needs: --text may be left out, and the usage error says so.
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&req.Line, "line", "", "the line that receives the message")
			f.StringVar(&req.From, "from", "", "the simulated contact's handle")
			f.StringVar(&req.Text, "text", "", "the message text")
			f.StringVar(&req.Chat, "chat", "", "an existing chat (cht_…) to send into")
			f.StringVar(&req.Group, "group", "", "name of a new group chat")
			f.StringVar(&participants, "participants", "", "members of the new group chat, comma-separated")
			f.StringVar(&req.Attach, "attach", "", "a file to attach: a picture, a .vcf contact card…")
			f.StringVar(&req.Audio, "audio", "", "an audio file sent as a voice memo")
			f.Func("transcription", "the voice memo's transcription (omit it: not transcribed yet)", func(v string) error {
				req.Transcription = &v
				return nil
			})
			f.StringVar(&req.Late, "late", "", "sent this long ago (30m, 2h): news read late")
			f.BoolVar(&req.UnknownSender, "unknown-sender", false, "the contact's chat is filed under Unknown Senders")
		},
		check: func() error {
			var missing []string
			for _, f := range []simString{{p: &req.Line, name: "line"}, {p: &req.From, name: "from"}} {
				if *f.p == "" {
					missing = append(missing, "--"+f.name)
				}
			}
			if req.Text == "" && req.Attach == "" && req.Audio == "" {
				missing = append(missing, "--text")
			}
			if len(missing) > 0 {
				return usageErrorf("sim inbound needs --line, --from and --text (or --attach or --audio): %s", isMissing(missing))
			}
			if (req.Group == "") != (participants == "") {
				return usageErrorf("--group and --participants go together")
			}
			if req.Transcription != nil && req.Audio == "" {
				return usageErrorf("--transcription goes with --audio")
			}
			// The daemon reads the file: give it a path that does not depend
			// on this command's working directory.
			for _, p := range []*string{&req.Attach, &req.Audio} {
				if *p != "" {
					abs, err := filepath.Abs(*p)
					if err != nil {
						return err
					}
					*p = abs
				}
			}
			req.Participants = splitList(participants)
			return nil
		},
		req: &req,
	})
}

func (a *app) simOwnerSendCommand() *cobra.Command {
	var req api.SimOwnerSend
	return a.simPost(simSpec{
		use:   "owner-send --line HANDLE --to HANDLE_OR_CHAT --text TEXT",
		short: "The line's owner sends a message from their own phone; prints the message as JSON",
		long: `The line's owner sends a message from another device (their iPhone or Mac),
not through Blueline: it arrives as message.sent, and the chat becomes human
active: agent keys may not write to it for the line's takeover_quiet. --to is
a contact's handle or a chat ID (cht_…). --to self (or one of the line's
self_handles) writes in the owner's chat with themselves instead: a
message.self event, written twice as Messages on a Mac does (the sent
message and its received copy), with no takeover; with --reply-to, as an
inline reply to a message there (a reply to an approval prompt sends the
draft in the owner's words). The message is printed as JSON.`,
		example: `  blueline sim owner-send --line +15550000000 --to +15551234567 --text "I'll take it from here"
  blueline sim owner-send --line +15550000000 --to self --text "summarise today's chats"`,
		needs: []simString{
			{&req.Line, "line", "the owner's line"},
			{&req.To, "to", "a contact's handle, a chat ID (cht_…), or self"},
			{&req.Text, "text", "what the owner writes"},
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&req.ReplyTo, "reply-to", "", "the message (msg_… or GUID) this one replies to inline")
		},
		req: &req,
	})
}

func (a *app) simReactionCommand() *cobra.Command {
	var req api.SimReaction
	return a.simPost(simSpec{
		use:   "reaction --line HANDLE --from HANDLE --message MSG_ID_OR_GUID --type TYPE [--emoji EMOJI] [--remove]",
		short: "A simulated contact adds or removes a tapback; prints the reaction as JSON",
		long: `A simulated contact adds (or, with --remove, removes) a tapback on a message
of its chat. --type is one of the six classic tapbacks, emoji (with --emoji)
or sticker. --from self is the line's owner, in their chat with themselves:
a like or dislike on an approval prompt there approves or declines its
draft. The reaction record is printed as JSON.`,
		example: `  blueline sim reaction --line +15550000000 --from +15551234567 --message msg_… --type love
  blueline sim reaction --line +15550000000 --from +15551234567 --message msg_… --type emoji --emoji 🎉
  blueline sim reaction --line +15550000000 --from +15551234567 --message msg_… --type love --remove`,
		needs: []simString{
			{&req.Line, "line", "the line whose message is reacted to"},
			{&req.From, "from", "the simulated contact's handle, or self"},
			{&req.Message, "message", "the message (msg_… or GUID)"},
			{&req.Type, "type", "love, like, dislike, laugh, emphasize, question, emoji (with --emoji) or sticker"},
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&req.Emoji, "emoji", "", "the emoji of a --type emoji tapback")
			f.BoolVar(&req.Remove, "remove", false, "remove the reaction instead of adding it")
		},
		check: func() error {
			switch {
			case req.Type == bridge.ReactionEmoji && req.Emoji == "":
				return usageErrorf("--type emoji needs --emoji")
			case req.Type != bridge.ReactionEmoji && req.Emoji != "":
				return usageErrorf("--emoji goes with --type emoji")
			}
			return nil
		},
		req: &req,
	})
}

func (a *app) simTypingCommand() *cobra.Command {
	var req api.SimTyping
	return a.simPost(simSpec{
		use:   "typing --line HANDLE --from HANDLE [--chat cht_…] [--state on|off]",
		short: "A simulated contact starts or stops typing; prints the indicator as JSON",
		long: `A simulated contact starts (default) or stops typing in its chat with the
line, or in a group chat with --chat. The indicator is printed as JSON.`,
		example: `  blueline sim typing --line +15550000000 --from +15551234567
  blueline sim typing --line +15550000000 --from +15551234567 --state off`,
		needs: []simString{
			{&req.Line, "line", "the line the contact is typing to"},
			{&req.From, "from", "the simulated contact's handle"},
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&req.Chat, "chat", "", "a group chat (cht_…); default the one-to-one chat")
			f.StringVar(&req.State, "state", "on", "on or off")
		},
		check: func() error {
			if req.State != "on" && req.State != "off" {
				return usageErrorf("--state is on or off")
			}
			return nil
		},
		req: &req,
	})
}

// sentMessage is the needs that name a message a simulated contact sent:
// --line, --from and --message.
func sentMessage(line, from, message *string) []simString {
	return []simString{
		{line, "line", "the line the message was sent to"},
		{from, "from", "the simulated contact who sent it"},
		{message, "message", "the message (msg_… or GUID)"},
	}
}

func (a *app) simEditCommand() *cobra.Command {
	var req api.SimEdit
	return a.simPost(simSpec{
		use:     "edit --line HANDLE --from HANDLE --message MSG_ID_OR_GUID --text TEXT",
		short:   "A simulated contact edits a message it sent; prints the message as JSON",
		long:    "A simulated contact edits a message it sent (message.edited). The message is printed as JSON.",
		example: "  blueline sim edit --line +15550000000 --from +15551234567 --message msg_… --text \"hello again\"",
		needs:   append(sentMessage(&req.Line, &req.From, &req.Message), simString{&req.Text, "text", "the message's new text"}),
		req:     &req,
	})
}

func (a *app) simUnsendCommand() *cobra.Command {
	var req api.SimUnsend
	return a.simPost(simSpec{
		use:     "unsend --line HANDLE --from HANDLE --message MSG_ID_OR_GUID",
		short:   "A simulated contact unsends a message it sent; prints the message as JSON",
		long:    "A simulated contact unsends a message it sent (message.unsent). The message is printed as JSON.",
		example: "  blueline sim unsend --line +15550000000 --from +15551234567 --message msg_…",
		needs:   sentMessage(&req.Line, &req.From, &req.Message),
		req:     &req,
	})
}

func (a *app) simAvailabilityCommand() *cobra.Command {
	var req api.SimAvailability
	return a.simPost(simSpec{
		use:   "availability --handle HANDLE [--imessage=false]",
		short: "Make a handle reachable on iMessage or not on the simulated network",
		long: `Make a handle reachable on iMessage (--imessage, the default) or not
(--imessage=false) on the simulated network, for GET /v1/availability: until
then, every handle is, except phone numbers ending in 99. Answers the API kept
about the handle are forgotten. Prints the handle's new state as JSON.`,
		example: `  blueline sim availability --handle +15551234567 --imessage=false`,
		needs:   []simString{{&req.Handle, "handle", "the contact's handle"}},
		flags: func(f *pflag.FlagSet) {
			f.BoolVar(&req.IMessage, "imessage", true, "whether the handle is reachable on iMessage")
		},
		req: &req,
	})
}

func (a *app) simReadCommand() *cobra.Command {
	var req api.SimRead
	return a.simPost(simSpec{
		use:   "read --line HANDLE --from HANDLE [--message MSG_ID_OR_GUID] [--delivered-only]",
		short: "A simulated contact reads a message the line sent; prints the message as JSON",
		long: `A simulated contact reads a message the line sent in their one-to-one chat,
by default the latest (message.delivered, then receipt.read); --delivered-only
only delivers it. The message is printed as JSON.`,
		example: `  blueline sim read --line +15550000000 --from +15551234567
  blueline sim read --line +15550000000 --from +15551234567 --message msg_… --delivered-only`,
		needs: []simString{
			{&req.Line, "line", "the line whose message is read"},
			{&req.From, "from", "the simulated contact who reads it"},
		},
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&req.Message, "message", "", "the line's message (msg_… or GUID); default its latest to --from")
			f.BoolVar(&req.DeliveredOnly, "delivered-only", false, "only deliver the message to the contact's device, unread")
		},
		req: &req,
	})
}

// simGroupCommand is `sim group`, whose flags name one change each.
func (a *app) simGroupCommand() *cobra.Command {
	var req api.SimGroup
	var given []string // the change flags, in order
	change := func(name, action string) { given, req.Action = append(given, "--"+name), action }
	return a.simPost(simSpec{
		use:   "group --line HANDLE --chat cht_… --by HANDLE (--add HANDLE | --remove HANDLE | --leave | --rename NAME | --photo | --remove-photo)",
		short: "A member of a group chat makes one change to it; prints the change as JSON",
		long: `A member of a group chat (or, with --by the line's handle, its owner) makes
one change to it (chat.updated). --rename "" clears the name. The change is
printed as the event's data.`,
		example: `  blueline sim group --line +15550000000 --chat cht_… --by +15551234567 --add +15557654321
  blueline sim group --line +15550000000 --chat cht_… --by +15551234567 --rename "Book club"
  blueline sim group --line +15550000000 --chat cht_… --by +15551234567 --leave`,
		needs: []simString{
			{&req.Line, "line", "the line in the group"},
			{&req.Chat, "chat", "the group chat (cht_…)"},
			{&req.By, "by", "the member who makes the change, or the line's own handle"},
		},
		flags: func(f *pflag.FlagSet) {
			member := func(name, action, help string) {
				f.Func(name, help, func(v string) error {
					if v == "" {
						return errors.New("needs a handle")
					}
					change(name, action)
					req.Participant = v
					return nil
				})
			}
			member("add", bridge.ChatParticipantAdded, "a handle --by adds to the group")
			member("remove", bridge.ChatParticipantRemoved, "a member --by removes from the group")
			// Func, not String: --rename "" is a change too (the name cleared).
			f.Func("rename", `the group's new name ("" clears it)`, func(v string) error {
				change("rename", bridge.ChatRenamed)
				req.Name = v
				return nil
			})
			for _, b := range []struct{ name, action, help string }{
				{"leave", bridge.ChatParticipantLeft, "--by leaves the group"},
				{"photo", bridge.ChatPhotoChanged, "--by changes the group's photo"},
				{"remove-photo", bridge.ChatPhotoRemoved, "--by removes the group's photo"},
			} {
				f.BoolFunc(b.name, b.help, func(v string) error {
					on, err := strconv.ParseBool(v)
					if on {
						change(b.name, b.action)
					}
					return err
				})
			}
		},
		check: func() error {
			switch {
			case len(given) == 0:
				return usageErrorf("sim group needs a change: --add, --remove, --leave, --rename, --photo or --remove-photo")
			case len(given) > 1:
				return usageErrorf("sim group makes one change at a time, not %s", strings.Join(given, " and "))
			}
			return nil
		},
		req: &req,
	})
}
