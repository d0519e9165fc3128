package cli

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

// listGroup is a client command that holds a list subcommand (and maybe
// others), with ls as list's alias, as the reference CLI has it.
func listGroup(use, short, example, subcommands string, subs ...*cobra.Command) *cobra.Command {
	g := group(use, short, example, subcommands)
	for _, s := range subs {
		if s.Name() == "list" {
			s.Aliases = append(s.Aliases, "ls")
		}
	}
	g.AddCommand(subs...)
	return g
}

func (a *app) linesCommand() *cobra.Command {
	return listGroup("lines", "List the lines you may use, and their Apple ID guard",
		"  blueline lines list\n  blueline lines list --json\n  blueline lines guard", "list or guard",
		a.linesListCommand(), a.linesGuardCommand())
}

func (a *app) linesListCommand() *cobra.Command {
	var f apiFlags
	c := &cobra.Command{
		Use:   "list",
		Short: "List the lines you may use, the sandbox line included",
		Long: `List the lines you may use (on the host, every line): ID, handle, label,
service, whether active. On a terminal, an aligned table with a header;
otherwise one tab-separated line per line. --json prints the API's list.`,
		Example: "  blueline lines list\n  blueline lines list --json",
		Args:    noArgs,
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			lines, err := c.Lines.List(ctx)
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(lines))
			for _, l := range lines {
				rows = append(rows, []string{l.ID, l.Handle, orNil(l.Label), l.Service, fmt.Sprint(l.IsActive)})
			}
			return a.printList(f.json, listJSON(lines), []string{"ID", "HANDLE", "LABEL", "SERVICE", "ACTIVE"}, rows, "")
		}),
	}
	f.add(c)
	return c
}

// pageFlags are the flags of a paged list.
type pageFlags struct {
	limit  int
	cursor string
}

func (p *pageFlags) add(c *cobra.Command) {
	c.Flags().IntVar(&p.limit, "limit", 0, "how many, 1 to 100 (default 50)")
	c.Flags().StringVar(&p.cursor, "cursor", "", "where the page starts: the next cursor of the page before")
}

func (a *app) chatsCommand() *cobra.Command {
	return listGroup("chats", "List a line's chats; lease them, and give the owner's back to agents",
		"  blueline chats list --line +15550000001\n  blueline chats resume --line +15550000001 --to +15551234567",
		"list, lease, release or resume", a.chatsListCommand(), a.chatsLeaseCommand(), a.chatsReleaseCommand(), a.chatsResumeCommand())
}

func (a *app) chatsListCommand() *cobra.Command {
	var f apiFlags
	var p pageFlags
	var line string
	c := &cobra.Command{
		Use:   "list --line HANDLE [--limit N] [--cursor CURSOR]",
		Short: "List a line's chats, most recent message first",
		Long: `List one page of a line's chats, most recent message first: ID, identifier,
name, whether a group, time of the last message. When more follow, the next
page's cursor is printed on stderr. --json prints the API's page.`,
		Example: "  blueline chats list --line +15550000001\n  blueline chats list --line +15550000001 --limit 10 --json",
		Args:    noArgs,
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			if line == "" {
				return usageErrorf("chats list needs --line (see `blueline lines list`)")
			}
			page, err := c.Chats.ListPage(ctx, client.ChatListParams{From: line, Limit: p.limit, Cursor: p.cursor})
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(page.Data))
			for _, ch := range page.Data {
				rows = append(rows, []string{ch.ID, ch.Identifier, orNil(ch.Name), fmt.Sprint(ch.IsGroup), optMsTime(ch.LastMessageAt)})
			}
			return a.printList(f.json, nonNilPage(page), []string{"ID", "IDENTIFIER", "NAME", "GROUP", "LAST MESSAGE"}, rows, client.NextCursor(page))
		}),
	}
	f.add(c)
	p.add(c)
	c.Flags().StringVar(&line, "line", "", "the line's handle (required)")
	return c
}

// nonNilPage is page with an empty list rather than null.
func nonNilPage[T any](page *api.List[T]) *api.List[T] {
	if page.Data == nil {
		page.Data = []T{}
	}
	return page
}

func (a *app) messagesCommand() *cobra.Command {
	return listGroup("messages", "List a chat's messages, or show one",
		"  blueline messages list --line +15550000001 --chat +15551234567\n  blueline messages get msg_… --line +15550000001 --chat +15551234567",
		"list or get", a.messagesListCommand(), a.messagesGetCommand())
}

func (a *app) messagesListCommand() *cobra.Command {
	var f apiFlags
	var p pageFlags
	var line, chat string
	c := &cobra.Command{
		Use:   "list --line HANDLE --chat HANDLE_OR_CHAT [--limit N] [--cursor CURSOR]",
		Short: "List a chat's messages, most recent first",
		Long: `List one page of a chat's messages, most recent first: ID, time, whether sent
by the line, sender, the start of the text. When more follow, the next page's
cursor is printed on stderr. --json prints the API's page.`,
		Example: "  blueline messages list --line +15550000001 --chat +15551234567\n  blueline messages list --line +15550000001 --chat cht_… --limit 100 --json",
		Args:    noArgs,
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			if line == "" || chat == "" {
				return usageErrorf("messages list needs --line and --chat")
			}
			page, err := c.Messages.ListPage(ctx, client.MessageListParams{From: line, To: chat, Limit: p.limit, Cursor: p.cursor})
			if err != nil {
				return err
			}
			rows := make([][]string, 0, len(page.Data))
			for _, m := range page.Data {
				text := ""
				if m.Text != nil {
					text = truncate(*m.Text, 80)
				}
				rows = append(rows, []string{m.ID, msTime(m.SentAt), fmt.Sprint(m.IsFromMe), m.Sender, text})
			}
			return a.printList(f.json, nonNilPage(page), []string{"ID", "SENT", "FROM ME", "SENDER", "TEXT"}, rows, client.NextCursor(page))
		}),
	}
	f.add(c)
	p.add(c)
	c.Flags().StringVar(&line, "line", "", "the line's handle (required)")
	c.Flags().StringVar(&chat, "chat", "", "the chat: a contact's handle or a cht_… ID (required)")
	return c
}

// messagesGetPages bounds how many pages messages get looks through.
const messagesGetPages = 10

func (a *app) messagesGetCommand() *cobra.Command {
	var f apiFlags
	var line, chat string
	c := &cobra.Command{
		Use:   "get MESSAGE_ID --line HANDLE --chat HANDLE_OR_CHAT",
		Short: "Show one message of a chat",
		Long: `Show one message (msg_… or GUID) of a chat. The API has no endpoint for one
message: it is looked for among the chat's latest 1,000.`,
		Example: "  blueline messages get msg_… --line +15550000001 --chat +15551234567 --json",
		Args:    exactArgs(1, "MESSAGE_ID"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			if line == "" || chat == "" {
				return usageErrorf("messages get needs --line and --chat")
			}
			id, n := args[0], 0
			for m, err := range c.Messages.List(ctx, client.MessageListParams{From: line, To: chat, Limit: 100}) {
				if err != nil {
					return err
				}
				if m.ID == id || m.GUID == id {
					if f.json {
						return printJSON(a.stdout, m)
					}
					return printFields(a.stdout, "", m)
				}
				if n++; n >= messagesGetPages*100 {
					break
				}
			}
			return fmt.Errorf("no message %s among the latest of this chat (message_not_found)", id)
		}),
	}
	f.add(c)
	c.Flags().StringVar(&line, "line", "", "the line's handle (required)")
	c.Flags().StringVar(&chat, "chat", "", "the chat: a contact's handle or a cht_… ID (required)")
	return c
}

func (a *app) outboxCommand() *cobra.Command {
	return listGroup("outbox", "Look up a write on its way out, cancel a pending one, or answer an agent's draft",
		"  blueline outbox get obx_…\n  blueline outbox cancel obx_…\n  blueline outbox waiting\n  blueline outbox approve obx_…", "get, cancel, waiting, approve or decline",
		a.outboxGetCommand(), a.outboxCancelCommand(), a.outboxWaitingCommand(), a.outboxApproveCommand(), a.outboxDeclineCommand())
}

func (a *app) outboxGetCommand() *cobra.Command {
	var f apiFlags
	c := &cobra.Command{
		Use:   "get OUTBOX_ID",
		Short: "Show an outbox item: pending, claimed, sent or failed",
		Long: `Show an outbox item (obx_…), what a send, a reaction, a typing indicator or a
receipt answered: its status (pending, claimed, sent or failed), attempts,
error and payload.`,
		Example: "  blueline outbox get obx_…\n  blueline outbox get obx_… --json",
		Args:    exactArgs(1, "OUTBOX_ID"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			item, err := c.Outbox.Get(ctx, args[0])
			return a.printAnswer(f, item, err)
		}),
	}
	f.add(c)
	return c
}

func (a *app) filesCommand() *cobra.Command {
	return listGroup("files", "Upload a file, or get one's download URL",
		"  blueline files upload cat.jpg\n  blueline files get file_…", "upload or get",
		a.filesUploadCommand(), a.filesGetCommand())
}

func (a *app) filesUploadCommand() *cobra.Command {
	var f apiFlags
	var mimeType, name string
	c := &cobra.Command{
		Use:   "upload PATH [--mime TYPE] [--filename NAME]",
		Short: "Upload a file and print its file_… ID",
		Long: `Upload a file (- reads it from stdin) for a message's attachments or a voice
memo, and print its record: the file_… ID to send, its URL, name, type and
size. The media type is the extension's unless --mime says otherwise
(.vcf: text/vcard, a contact card).`,
		Example: "  blueline files upload cat.jpg\n  blueline files upload card.vcf --json\n  cat memo.m4a | blueline files upload - --mime audio/mp4 --filename memo.m4a",
		Args:    exactArgs(1, "PATH"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			file, err := a.upload(ctx, c, args[0], name, mimeType, "", true)
			if err != nil {
				return err
			}
			return printResult(a.stdout, f.json, "Uploaded "+orNil(file.Filename), file)
		}),
	}
	f.add(c)
	c.Flags().StringVar(&mimeType, "mime", "", "the media type (default: the extension's)")
	c.Flags().StringVar(&name, "filename", "", "the file's name (default: the path's base name)")
	return c
}

// fileLink is what files get prints with --json.
type fileLink struct {
	ID  string `json:"id"`
	URL string `json:"url"`
}

func (a *app) filesGetCommand() *cobra.Command {
	var f apiFlags
	var download bool
	c := &cobra.Command{
		Use:   "get FILE_ID [--download]",
		Short: "Print a file's download URL, or its content",
		Long: `Print a fresh download URL of a file (file_…): signed, it needs no key and
works for an hour. --download writes the file's content to stdout instead.`,
		Example: "  blueline files get file_…\n  blueline files get file_… --download > cat.jpg",
		Args:    exactArgs(1, "FILE_ID"),
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			if download && !c.local {
				body, err := c.Files.Download(ctx, args[0])
				if err != nil {
					return err
				}
				defer body.Close()
				_, err = io.Copy(a.stdout, body)
				return err
			}
			link, err := c.Files.Get(ctx, args[0])
			if err != nil {
				return err
			}
			if download {
				// The admin socket serves the API, not the signed download
				// URLs: those are the daemon's listener's, and need no key.
				return a.fetchTo(ctx, link.URL)
			}
			if f.json {
				return printJSON(a.stdout, fileLink{ID: link.ID, URL: link.URL})
			}
			_, err = fmt.Fprintln(a.stdout, link.URL)
			return err
		}),
	}
	f.add(c)
	c.Flags().BoolVar(&download, "download", false, "write the file's content to stdout")
	return c
}

// fetchTo writes what a GET of link (a signed download URL) answers to
// stdout.
func (a *app) fetchTo(ctx context.Context, link string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, link, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download from %s: %s", req.URL.Host, resp.Status)
	}
	_, err = io.Copy(a.stdout, resp.Body)
	return err
}

// printAnswer prints what an API call answered (or its error): an outbox
// item, a lease…, as fields, or as JSON with --json.
func (a *app) printAnswer(f apiFlags, v any, err error) error {
	if err != nil {
		return err
	}
	if f.json {
		return printJSON(a.stdout, v)
	}
	return printFields(a.stdout, "", v)
}
