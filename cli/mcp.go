package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/mcpserver"
)

// mcpCommand serves Blueline's MCP tools over stdio, for desktop agents.
func (a *app) mcpCommand() *cobra.Command {
	var api apiFlags // --base-url and --owner, as the client commands have them
	var attachDir, cursorFile, permissionLine string
	var allowPrivate, channel bool
	c := &cobra.Command{
		Use:   "mcp",
		Short: "Serve Blueline's tools to an AI agent over MCP (stdio)",
		Long: `Serve Blueline's tools to an AI agent over the Model Context Protocol on
standard input and output, as desktop agents (Claude Desktop, editors) start
their MCP servers: list lines and chats, read a chat, send, reply, react,
show typing, mark read, check an outbox item and wait for the next message.

On the daemon's host it reaches the running daemon through its admin socket,
with no key, as the host's operator (every line, every scope); --owner acts
as that owner's keys do (its sandbox). Elsewhere, --base-url (or
$BLUELINE_BASE_URL) names the API and $BLUELINE_API_KEY the key, whose
scopes and lines then hold.

Attachments: a file_ ID, or an http(s) URL on a public address. Local files
only under --attach-dir: what contacts write can steer an agent, and an
agent must not be talked into sending them any file you can read.

The agent follows the API's rules: a line may message only contacts who
wrote first (the sandbox: its paired phone), within the key's request limit
and the sandbox's daily quota.

A host that subscribes to blueline://lines/{line}/needing-reply is told when
a contact writes on that line; the position in the event stream is kept in
--cursor-file, so that what arrives while this command is not running is
told when it starts again.

--channel makes it a Claude Code channel: each live message of a known
contact on the lines is pushed into the session as it arrives (what the
contact wrote marked as untrusted), from its own position in the event
stream, kept in the cursor file's name with .channel added. With
--permission-line, on the daemon's host only, the session's permission
prompts are written into the owner's chat with themselves on that line,
and the owner answers there: "yes ID" allows, "no ID" denies.`,
		Example: `  blueline mcp
  blueline mcp --owner you@example.com --attach-dir ~/Blueline/outbox
  BLUELINE_API_KEY=sk_live_… blueline mcp --base-url https://blueline.example.com`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if cursorFile == "" {
				dir, err := os.UserConfigDir()
				if err != nil {
					return fmt.Errorf("--cursor-file: %w", err)
				}
				cursorFile = filepath.Join(dir, "blueline", "mcp.cursor")
			}
			if permissionLine != "" && !channel {
				return errors.New("--permission-line needs --channel")
			}
			opts := mcpserver.Options{AttachDir: attachDir, AllowPrivateURLs: allowPrivate, Version: a.build.Version, CursorFile: cursorFile}
			conn, err := a.connect(&api, nil)
			if err != nil {
				return err
			}
			if permissionLine != "" && (!conn.local || api.owner != "") {
				// Only the line's owner answers the session's prompts:
				// a key, an agent's among them, could answer its own.
				return errors.New("--permission-line is for the daemon's host, as its operator (without --base-url or --owner)")
			}
			if channel {
				opts.Channel = &mcpserver.Channel{CursorFile: cursorFile + ".channel", PermissionLine: permissionLine}
			}
			if conn.local {
				// The agent is told the limits it works within.
				cfg, err := a.config()
				if err != nil {
					return err
				}
				opts.RequestsPerHour, opts.SandboxQuota = cfg.Limits.RequestsPerHour, cfg.Sandbox.DailyQuota
			}
			opts.Client = func(*mcp.RequestExtra) (*client.Client, error) { return conn.Client, nil }
			var t mcp.Transport = &mcp.IOTransport{Reader: io.NopCloser(cmd.InOrStdin()), Writer: nopWriteCloser{a.stdout}}
			if opts.Channel != nil {
				t = opts.Channel.Transport(t)
			}
			err = mcpserver.New(opts).Run(cmd.Context(), t)
			if errors.Is(err, mcp.ErrConnectionClosed) || cmd.Context().Err() != nil {
				return nil // the agent went away, or we were told to stop
			}
			return err
		},
	}
	f := c.Flags()
	f.StringVar(&api.owner, "owner", "", "act as this owner's keys do, on the admin socket (its sandbox)")
	f.StringVar(&api.baseURL, "base-url", "", "the daemon's URL, to reach it over the network with $"+envAPIKey+" (default $"+envBaseURL+"; none: the local daemon, through its admin socket)")
	f.StringVar(&attachDir, "attach-dir", "", "allow attaching local files from this folder only (default: none)")
	f.BoolVar(&allowPrivate, "allow-private-urls", false, "allow attachment URLs on loopback and private addresses")
	f.BoolVar(&channel, "channel", false, "be a Claude Code channel: push contacts' messages into the session")
	f.StringVar(&permissionLine, "permission-line", "", "with --channel: relay the session's permission prompts to the owner's chat with themselves on this line")
	f.StringVar(&cursorFile, "cursor-file", "", "where subscriptions keep their place in the event stream (default: blueline/mcp.cursor in the user's configuration folder)")
	return c
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
