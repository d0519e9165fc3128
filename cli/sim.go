package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/server"
)

// simCommands lists the sim subcommands, for the usage errors.
const simCommands = "inbound, reaction, typing, edit, unsend, read or group"

func cmdSim(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: sim needs a subcommand: %s", errUsage, simCommands)
	}
	fs := flag.NewFlagSet("sim "+args[0], flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file")
	var path string
	var in any
	switch args[0] {
	case "inbound":
		var req server.SimInbound
		fs.StringVar(&req.Line, "line", "", "the line that receives the message")
		fs.StringVar(&req.From, "from", "", "the simulated contact's handle")
		fs.StringVar(&req.Text, "text", "", "the message text")
		fs.StringVar(&req.Chat, "chat", "", "an existing chat (cht_…) to send into")
		fs.StringVar(&req.Group, "group", "", "name of a new group chat")
		participants := fs.String("participants", "", "members of the new group chat, comma-separated")
		fs.StringVar(&req.Attach, "attach", "", "a file to attach: a picture, a .vcf contact card…")
		fs.StringVar(&req.Audio, "audio", "", "an audio file sent as a voice memo")
		fs.Func("transcription", "the voice memo's transcription (omit it: not transcribed yet)", func(v string) error {
			req.Transcription = &v
			return nil
		})
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" || req.Text == "" && req.Attach == "" && req.Audio == "" {
			return fmt.Errorf("%w: sim inbound needs --line, --from and --text (or --attach or --audio)", errUsage)
		}
		if (req.Group == "") != (*participants == "") {
			return fmt.Errorf("%w: --group and --participants go together", errUsage)
		}
		if req.Transcription != nil && req.Audio == "" {
			return fmt.Errorf("%w: --transcription goes with --audio", errUsage)
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
		req.Participants = splitList(*participants)
		path, in = "/sim/inbound", req
	case "reaction":
		var req server.SimReaction
		fs.StringVar(&req.Line, "line", "", "the line whose message is reacted to")
		fs.StringVar(&req.From, "from", "", "the simulated contact's handle")
		fs.StringVar(&req.Message, "message", "", "the message (msg_… or GUID)")
		fs.StringVar(&req.Type, "type", "", "love, like, dislike, laugh, emphasize, question, emoji (with --emoji) or sticker")
		fs.StringVar(&req.Emoji, "emoji", "", "the emoji of a --type emoji tapback")
		fs.BoolVar(&req.Remove, "remove", false, "remove the reaction instead of adding it")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" || req.Message == "" || req.Type == "" {
			return fmt.Errorf("%w: sim reaction needs --line, --from, --message and --type", errUsage)
		}
		switch {
		case req.Type == bridge.ReactionEmoji && req.Emoji == "":
			return fmt.Errorf("%w: --type emoji needs --emoji", errUsage)
		case req.Type != bridge.ReactionEmoji && req.Emoji != "":
			return fmt.Errorf("%w: --emoji goes with --type emoji", errUsage)
		}
		path, in = "/sim/reaction", req
	case "typing":
		var req server.SimTyping
		fs.StringVar(&req.Line, "line", "", "the line the contact is typing to")
		fs.StringVar(&req.From, "from", "", "the simulated contact's handle")
		fs.StringVar(&req.Chat, "chat", "", "a group chat (cht_…); default the one-to-one chat")
		fs.StringVar(&req.State, "state", "on", "on or off")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" {
			return fmt.Errorf("%w: sim typing needs --line and --from", errUsage)
		}
		if req.State != "on" && req.State != "off" {
			return fmt.Errorf("%w: --state is on or off", errUsage)
		}
		path, in = "/sim/typing", req
	case "edit":
		var req server.SimEdit
		fs.StringVar(&req.Line, "line", "", "the line the message was sent to")
		fs.StringVar(&req.From, "from", "", "the simulated contact who sent it")
		fs.StringVar(&req.Message, "message", "", "the message (msg_… or GUID)")
		fs.StringVar(&req.Text, "text", "", "the message's new text")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" || req.Message == "" || req.Text == "" {
			return fmt.Errorf("%w: sim edit needs --line, --from, --message and --text", errUsage)
		}
		path, in = "/sim/edit", req
	case "unsend":
		var req server.SimUnsend
		fs.StringVar(&req.Line, "line", "", "the line the message was sent to")
		fs.StringVar(&req.From, "from", "", "the simulated contact who sent it")
		fs.StringVar(&req.Message, "message", "", "the message (msg_… or GUID)")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" || req.Message == "" {
			return fmt.Errorf("%w: sim unsend needs --line, --from and --message", errUsage)
		}
		path, in = "/sim/unsend", req
	case "read":
		var req server.SimRead
		fs.StringVar(&req.Line, "line", "", "the line whose message is read")
		fs.StringVar(&req.From, "from", "", "the simulated contact who reads it")
		fs.StringVar(&req.Message, "message", "", "the line's message (msg_… or GUID); default its latest to --from")
		fs.BoolVar(&req.DeliveredOnly, "delivered-only", false, "only deliver the message to the contact's device, unread")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if req.Line == "" || req.From == "" {
			return fmt.Errorf("%w: sim read needs --line and --from", errUsage)
		}
		path, in = "/sim/read", req
	case "group":
		req, err := parseSimGroup(fs, args[1:])
		if err != nil {
			return err
		}
		path, in = "/sim/group", req
	default:
		return fmt.Errorf("%w: unknown sim command %q (%s)", errUsage, args[0], simCommands)
	}
	return adminPrint(ctx, *cfgPath, http.MethodPost, path, in, stdout)
}

// parseSimGroup reads `sim group`, whose flags name one change each.
func parseSimGroup(fs *flag.FlagSet, args []string) (server.SimGroup, error) {
	var req server.SimGroup
	fs.StringVar(&req.Line, "line", "", "the line in the group")
	fs.StringVar(&req.Chat, "chat", "", "the group chat (cht_…)")
	fs.StringVar(&req.By, "by", "", "the member who makes the change, or the line's own handle")
	var given []string // the change flags, in order
	change := func(name, action string) { given, req.Action = append(given, "--"+name), action }
	member := func(name, action, help string) {
		fs.Func(name, help, func(v string) error {
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
	fs.Func("rename", `the group's new name ("" clears it)`, func(v string) error {
		change("rename", bridge.ChatRenamed)
		req.Name = v
		return nil
	})
	for _, f := range []struct{ name, action, help string }{
		{"leave", bridge.ChatParticipantLeft, "--by leaves the group"},
		{"photo", bridge.ChatPhotoChanged, "--by changes the group's photo"},
		{"remove-photo", bridge.ChatPhotoRemoved, "--by removes the group's photo"},
	} {
		fs.BoolFunc(f.name, f.help, func(v string) error {
			on, err := strconv.ParseBool(v)
			if on {
				change(f.name, f.action)
			}
			return err
		})
	}
	if err := parseNoArgs(fs, args); err != nil {
		return req, err
	}
	switch {
	case req.Line == "" || req.Chat == "" || req.By == "":
		return req, fmt.Errorf("%w: sim group needs --line, --chat and --by", errUsage)
	case len(given) == 0:
		return req, fmt.Errorf("%w: sim group needs a change: --add, --remove, --leave, --rename, --photo or --remove-photo", errUsage)
	case len(given) > 1:
		return req, fmt.Errorf("%w: sim group makes one change at a time, not %s", errUsage, strings.Join(given, " and "))
	}
	return req, nil
}

func cmdSandbox(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file")
	owner := fs.String("owner", "", "start (or show) this owner's activation")
	if err := parseNoArgs(fs, args); err != nil {
		return err
	}
	if *owner != "" {
		return adminPrint(ctx, *cfgPath, http.MethodPost, "/sandbox", map[string]string{"owner": *owner}, stdout)
	}
	return adminPrint(ctx, *cfgPath, http.MethodGet, "/sandbox", nil, stdout)
}
