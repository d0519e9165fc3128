package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client"
)

// chatTarget is the --line and --to of a command on one chat.
type chatTarget struct{ line, to string }

func (t *chatTarget) add(c *cobra.Command) {
	c.Flags().StringVar(&t.line, "line", "", "the line: its handle or ln_ ID (required)")
	c.Flags().StringVar(&t.to, "to", "", "the chat: its cht_ ID, a group's identifier, or a contact's handle (required)")
}

func (t *chatTarget) check(command string) error {
	var missing []string
	if t.line == "" {
		missing = append(missing, "--line")
	}
	if t.to == "" {
		missing = append(missing, "--to")
	}
	if len(missing) > 0 {
		return usageErrorf("chats %s needs --line and --to: %s", command, isMissing(missing))
	}
	return nil
}

func (a *app) chatsLeaseCommand() *cobra.Command {
	var p client.LeaseParams
	c := a.chatCommand(&cobra.Command{
		Use:   "lease --line HANDLE --to CHAT --ttl SECONDS [--label TEXT]",
		Short: "Lease a chat to the key in use, or renew its lease",
		Long: `Lease a chat to the key in use for --ttl seconds (10 to 86400): other agent
keys' writes to it are refused (chat_leased) until the lease expires or is
released. The same key again renews it; a key that is not an agent's (the
host's operator included) takes another key's lease over.`,
		Example: "  blueline chats lease --line +15550000001 --to +15551234567 --ttl 600 --label refund",
	}, func(ctx context.Context, c *apiConn, line, to string) (any, error) {
		p.From, p.To = line, to
		return c.Chats.Lease(ctx, p)
	})
	c.Flags().IntVar(&p.TTLSeconds, "ttl", 0, "how long the lease holds, in seconds: 10 to 86400 (required)")
	c.Flags().StringVar(&p.Label, "label", "", "what the lease is for")
	return c
}

// chatCommand is a command on one chat (--line, --to) whose answer call
// gets and the command prints.
func (a *app) chatCommand(c *cobra.Command, call func(ctx context.Context, c *apiConn, line, to string) (any, error)) *cobra.Command {
	var f apiFlags
	var t chatTarget
	name := c.Name()
	c.Args = noArgs
	c.RunE = a.apiRun(&f, func(ctx context.Context, conn *apiConn, args []string) error {
		if err := t.check(name); err != nil {
			return err
		}
		v, err := call(ctx, conn, t.line, t.to)
		return a.printAnswer(f, v, err)
	})
	t.add(c)
	f.add(c)
	return c
}

func (a *app) chatsReleaseCommand() *cobra.Command {
	return a.chatCommand(&cobra.Command{
		Use:     "release --line HANDLE --to CHAT",
		Short:   "Release a chat's lease",
		Long:    `Release a chat's lease: the holder's own, or any with a key that is not an agent's (the host's operator included).`,
		Example: "  blueline chats release --line +15550000001 --to +15551234567",
	}, func(ctx context.Context, c *apiConn, line, to string) (any, error) {
		return c.Chats.Release(ctx, line, to)
	})
}

func (a *app) chatsResumeCommand() *cobra.Command {
	return a.chatCommand(&cobra.Command{
		Use:   "resume --line HANDLE --to CHAT",
		Short: "Give a chat the owner took over back to the agents",
		Long: `When the line's owner writes in a chat from their own devices, agent keys may
not write to it for the line's takeover_quiet. This gives it back to them at
once, as the console's Resume agents button does. Agent keys may not.`,
		Example: "  blueline chats resume --line +15550000001 --to +15551234567",
	}, func(ctx context.Context, c *apiConn, line, to string) (any, error) {
		return c.Chats.Resume(ctx, line, to)
	})
}
