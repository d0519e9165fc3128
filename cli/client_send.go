package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// pipedStdin is the standard input when it is piped, nil when there is
// none or it is a terminal.
func (a *app) pipedStdin() io.Reader {
	if f, ok := a.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return nil
	}
	return a.stdin
}

// maxStdinText bounds the text read from stdin.
const maxStdinText = 1 << 20

func (a *app) sendCommand() *cobra.Command {
	var f apiFlags
	var from, attach, replyTo, audio string
	c := &cobra.Command{
		Use:   "send TO [TEXT] [--from HANDLE] [--attach PATH|file_…] [--reply-to MSG_ID_OR_GUID] [--audio PATH]",
		Short: "Send a text, a file or a voice memo to a contact or a chat",
		Long: `Send a message from a line to a contact (a phone number or account-ID handle)
or a chat (cht_…). The text is the second argument, else stdin when piped.
--attach uploads a file and attaches it (a file_… ID already uploaded is used
as is); --audio uploads an audio file and sends it as a voice memo, alone.
Without --from, the line is the only active line, else the only one besides
the sandbox line. Prints the outbox item (pending).`,
		Example: `  blueline send +15551234567 "hello" --from +15550000001
  echo hello | blueline send +15551234567 --from +15550000001
  blueline send +15551234567 --attach cat.jpg --from +15550000001
  blueline send +15551234567 --audio memo.m4a --from +15550000001 --json
  BLUELINE_API_KEY=sk_live_… blueline send +15551234567 hi --base-url https://blueline.example.com`,
		Args: rangeArgs(1, 2, "TO and at most a TEXT"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			to, text, hasText := args[0], "", len(args) == 2
			if hasText {
				text = args[1]
			}
			switch {
			case audio != "" && (hasText || attach != ""):
				return usageErrorf("--audio sends a voice memo alone: no TEXT, no --attach")
			case audio == "" && !hasText:
				// The text from stdin, when piped: with a file, too.
				if in := a.pipedStdin(); in != nil {
					data, err := io.ReadAll(io.LimitReader(in, maxStdinText))
					if err != nil {
						return err
					}
					text = strings.TrimRight(string(data), "\r\n")
				}
				if text == "" && attach == "" {
					return usageErrorf("send needs a TEXT (an argument, or stdin), --attach or --audio")
				}
			}
			line, err := resolveFrom(ctx, c, from)
			if err != nil {
				return err
			}
			if audio != "" {
				file, err := a.upload(ctx, c, audio, "", "", "audio/mp4", false)
				if err != nil {
					return err
				}
				item, err := c.AudioMessages.Send(ctx, client.AudioMessageSendParams{From: line, To: to, AudioMessage: file.ID, ReplyTo: replyTo})
				if err != nil {
					return err
				}
				return printResult(a.stdout, f.json, fmt.Sprintf("Queued a voice memo to %s via %s", to, line), item)
			}
			p := client.MessageSendParams{From: line, To: to, Text: text, ReplyTo: replyTo}
			if attach != "" {
				id, err := a.attachment(ctx, c, attach)
				if err != nil {
					return err
				}
				p.Attachments = []string{id}
			}
			item, err := c.Messages.Send(ctx, p)
			if err != nil {
				return err
			}
			return printResult(a.stdout, f.json, fmt.Sprintf("Queued to %s via %s", to, line), item)
		}),
	}
	f.add(c)
	fl := c.Flags()
	fl.StringVar(&from, "from", "", "the line to send from (default: the only active line)")
	fl.StringVar(&attach, "attach", "", "a file to upload and attach, or the file_… ID of one uploaded")
	fl.StringVar(&replyTo, "reply-to", "", "the message replied to (msg_… or GUID)")
	fl.StringVar(&audio, "audio", "", "an audio file to upload and send as a voice memo (the line needs advanced features)")
	return c
}

// attachment is the file_ ID of --attach: the file at path uploaded, or
// path itself when it is a file_ ID and no such file exists.
func (a *app) attachment(ctx context.Context, c *apiConn, path string) (string, error) {
	if strings.HasPrefix(path, "file_") {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return path, nil
		}
	}
	file, err := a.upload(ctx, c, path, "", "", "", false)
	if err != nil {
		return "", err
	}
	return file.ID, nil
}

// upload uploads the file at path ("-": stdin, read by in) named name
// (default its base name) of media type mimeType (default the one of its
// extension, else fallback, else application/octet-stream). Unless quiet,
// it says so on stderr.
func (a *app) upload(ctx context.Context, c *apiConn, path, name, mimeType, fallback string, quiet bool) (*api.File, error) {
	var body io.Reader
	if path == "-" {
		in := a.pipedStdin()
		if in == nil {
			return nil, usageErrorf("- reads the file from stdin, which is a terminal")
		}
		body = in
		if name == "" {
			name = "stdin"
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if fi, err := f.Stat(); err == nil && fi.IsDir() {
			return nil, fmt.Errorf("%s is a folder, not a file", path)
		}
		body = f
		if name == "" {
			name = filepath.Base(path)
		}
	}
	if mimeType == "" {
		mimeType = mimeOf(path, fallback)
	}
	file, err := c.Files.Upload(ctx, name, body, mimeType)
	if err != nil {
		return nil, err
	}
	if !quiet {
		fmt.Fprintf(a.stderr, "uploaded %s as %s (%s, %d bytes)\n", name, file.ID, file.MimeType, file.Size)
	}
	return file, nil
}

// mimeOf is the media type of a file by its extension: a few the API
// cares about (contact cards, voice memos), then the system's, else
// fallback, else application/octet-stream.
func mimeOf(path, fallback string) string {
	ext := strings.ToLower(filepath.Ext(path))
	switch ext {
	case ".vcf", ".vcard":
		return "text/vcard"
	case ".m4a":
		return "audio/mp4"
	case ".caf":
		return "audio/x-caf"
	case ".amr":
		return "audio/amr"
	}
	if t := mime.TypeByExtension(ext); ext != "" && t != "" {
		return t
	}
	if fallback != "" {
		return fallback
	}
	return "application/octet-stream"
}

func (a *app) reactCommand() *cobra.Command {
	var f apiFlags
	var from, to string
	var remove bool
	c := &cobra.Command{
		Use:   "react MESSAGE_ID TYPE --to HANDLE_OR_CHAT [--from HANDLE] [--remove]",
		Short: "Send a tapback on a message",
		Long: `Send a tapback (love, like, dislike, laugh, emphasize or question, or one emoji
such as 🎉 for an emoji tapback) on a message (msg_… or GUID) of the chat --to
names; --remove takes it back. The line needs advanced features. Prints the
outbox item (pending).`,
		Example: `  blueline react msg_… love --to +15551234567 --from +15550000001
  blueline react msg_… 🎉 --to +15551234567 --from +15550000001
  blueline react msg_… love --to +15551234567 --from +15550000001 --remove --json`,
		Args: exactArgs(2, "MESSAGE_ID and TYPE"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			if to == "" {
				return usageErrorf("react needs --to (the contact's handle or the chat's cht_… ID)")
			}
			line, err := resolveFrom(ctx, c, from)
			if err != nil {
				return err
			}
			item, err := c.Reactions.Send(ctx, client.ReactionSendParams{From: line, To: to, MessageID: args[0], Type: args[1], Remove: remove})
			if err != nil {
				return err
			}
			verb := "Reacted"
			if remove {
				verb = "Removed"
			}
			return printResult(a.stdout, f.json, fmt.Sprintf("%s %s on %s", verb, args[1], args[0]), item)
		}),
	}
	f.add(c)
	fl := c.Flags()
	fl.StringVar(&to, "to", "", "the chat: the contact's handle or a cht_… ID (required)")
	fl.StringVar(&from, "from", "", "the line (default: the only active line)")
	fl.BoolVar(&remove, "remove", false, "take the tapback back")
	return c
}

func (a *app) typingCommand() *cobra.Command {
	var f apiFlags
	var from string
	var off bool
	c := &cobra.Command{
		Use:   "typing TO [--from HANDLE] [--off]",
		Short: "Show (or, with --off, hide) the line's typing indicator in a chat",
		Long: `Show the line's typing indicator in a chat with a contact or in a group (cht_…),
or hide it with --off. The line needs advanced features. Prints the outbox
item (pending). ` + "`typing list`" + ` lists a chat's current indicators.`,
		Example: `  blueline typing +15551234567 --from +15550000001
  blueline typing +15551234567 --from +15550000001 --off
  blueline typing list --line +15550000001 --chat +15551234567`,
		Args: exactArgs(1, "TO"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			line, err := resolveFrom(ctx, c, from)
			if err != nil {
				return err
			}
			state, verb := client.TypingOn, "Typing to"
			if off {
				state, verb = client.TypingOff, "Stopped typing to"
			}
			item, err := c.Typing.Send(ctx, client.TypingSendParams{From: line, To: args[0], State: state})
			if err != nil {
				return err
			}
			return printResult(a.stdout, f.json, fmt.Sprintf("%s %s via %s", verb, args[0], line), item)
		}),
	}
	f.add(c)
	c.Flags().StringVar(&from, "from", "", "the line (default: the only active line)")
	c.Flags().BoolVar(&off, "off", false, "stop typing instead of starting")
	c.AddCommand(a.typingListCommand())
	return c
}

func (a *app) typingListCommand() *cobra.Command {
	var f apiFlags
	var line, chat string
	c := &cobra.Command{
		Use:     "list --line HANDLE --chat HANDLE_OR_CHAT",
		Short:   "List a chat's current typing indicators",
		Example: "  blueline typing list --line +15550000001 --chat +15551234567 --json",
		Args:    noArgs,
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			if line == "" || chat == "" {
				return usageErrorf("typing list needs --line and --chat")
			}
			items, err := c.Typing.List(ctx, client.ChatRef{From: line, To: chat})
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(items))
			for _, i := range items {
				rows = append(rows, []string{i.ID, i.ChatID, i.Handle, fmt.Sprint(i.IsTyping), msTime(i.UpdatedAt)})
			}
			return a.printList(f.json, listJSON(items), []string{"ID", "CHAT", "HANDLE", "TYPING", "UPDATED"}, rows, "")
		}),
	}
	f.add(c)
	c.Flags().StringVar(&line, "line", "", "the line's handle (required)")
	c.Flags().StringVar(&chat, "chat", "", "the chat: a contact's handle or a cht_… ID (required)")
	return c
}

func (a *app) readCommand() *cobra.Command {
	var f apiFlags
	var from string
	c := &cobra.Command{
		Use:   "read TO [--from HANDLE]",
		Short: "Mark a chat read (send a read receipt)",
		Long: `Mark the line's chat with a contact, or a group (cht_…), read: the contact sees a
read receipt. The line needs advanced features. Prints the outbox item
(pending).`,
		Example: "  blueline read +15551234567 --from +15550000001\n  blueline read cht_… --from +15550000001 --json",
		Args:    exactArgs(1, "TO"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			line, err := resolveFrom(ctx, c, from)
			if err != nil {
				return err
			}
			item, err := c.Receipts.Send(ctx, client.ReceiptSendParams{From: line, To: args[0]})
			if err != nil {
				return err
			}
			return printResult(a.stdout, f.json, fmt.Sprintf("Sent a read receipt to %s via %s", args[0], line), item)
		}),
	}
	f.add(c)
	c.Flags().StringVar(&from, "from", "", "the line (default: the only active line)")
	return c
}

// exactArgs wants n positional arguments, what names them.
func exactArgs(n int, what string) cobra.PositionalArgs {
	return rangeArgs(n, n, what)
}

// rangeArgs wants between lo and hi positional arguments.
func rangeArgs(lo, hi int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usageErrorf("%s takes %s", cmd.CommandPath()[len("blueline "):], what)
		}
		return nil
	}
}
