package cli

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client/api"
)

func (a *app) keysCommand() *cobra.Command {
	keys := group("keys", "Create, list and revoke API keys",
		"  blueline keys create --label my-app --owner you@example.com\n  blueline keys list\n  blueline keys revoke key_…",
		"create, list or revoke")
	keys.AddCommand(a.keysCreateCommand(), a.keysListCommand(), a.keysRevokeCommand())
	return keys
}

func (a *app) keysCreateCommand() *cobra.Command {
	var req api.KeyRequest
	var lines, except, allowFrom string
	var asJSON bool
	c := &cobra.Command{
		Use:   "create --label TEXT [--scopes all|scope,…] [--lines HANDLE_OR_ID,…] [--owner NAME] [--agent [--approval required [--approval-except CONTACT,…]] [--allow-from HANDLE,…] [--group-mention REGEXP]]",
		Short: "Create an API key and print it (only the key) on stdout",
		Long: `Create an API key and print it, and only it, on stdout: sk_live_ and 40 base62
characters. The key is shown once: the daemon keeps only its hash.`,
		Example: `  blueline keys create --label my-app --owner you@example.com
  blueline keys create --label reader --scopes messages:read --lines +15550000000
  blueline keys create --label support-bot --agent
  blueline keys create --label drafter --agent --approval required --approval-except +15551234567
  blueline keys create --label family-bot --agent --allow-from +15551234567,ann@example.com --group-mention '(?i)@bot\b'
  KEY=$(blueline keys create --label ci)`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(req.Label) == "" {
				return usageErrorf("keys create needs --label")
			}
			req.Lines, req.ApprovalExcept, req.AllowFrom = splitList(lines), splitList(except), splitList(allowFrom)
			var info api.KeyInfo
			if err := a.adminDo(cmd.Context(), http.MethodPost, "/keys", req, &info); err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.stdout, info)
			}
			fmt.Fprintln(a.stdout, info.Secret)
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&req.Label, "label", "", "what the key is for (required)")
	f.StringVar(&req.Scopes, "scopes", "all", "all, or scope,scope,…")
	f.StringVar(&lines, "lines", "", "handles or line IDs the key is limited to, comma-separated (default all)")
	f.StringVar(&req.Owner, "owner", "", "who the key belongs to")
	f.BoolVar(&req.Agent, "agent", false, "an AI agent's key: it yields to the line's owner and to other keys' chat leases")
	f.StringVar(&req.Approval, "approval", "none", "required: the agent's messages wait for the owner's approval (drafts); none: they do not")
	f.StringVar(&except, "approval-except", "", "contacts whose chats need no approval, comma-separated (with --approval required)")
	f.StringVar(&allowFrom, "allow-from", "", "an agent key's contacts, comma-separated: it hears from and writes to these only")
	f.StringVar(&req.GroupMention, "group-mention", "", "an agent key hears a contact's group message only when it matches this Go regexp")
	f.BoolVar(&asJSON, "json", false, "print the key's record, key included, as JSON")
	return c
}

func (a *app) keysListCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "list",
		Short: "List the active keys (never the keys themselves)",
		Long: `List the active keys: ID, label, scopes, lines, owner, creation time,
whether an agent uses it and whether its messages wait for approval; never the key itself. On a terminal, an aligned table with a header; otherwise one
tab-separated line per key.`,
		Example: "  blueline keys list\n  blueline keys list --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var keys []api.KeyInfo
			raw, err := a.adminList(cmd.Context(), "/keys", &keys)
			if err != nil {
				return err
			}
			if asJSON {
				return printRawJSON(a.stdout, raw)
			}
			rows := make([][]string, 0, len(keys))
			for _, k := range keys {
				agent := "no"
				if k.Agent {
					agent = "yes"
				}
				// AGENT and APPROVAL come last, so that scripts reading
				// the columns before them by position read them as before.
				rows = append(rows, []string{k.ID, k.Label, scopeList(k.Scopes), orAll(k.Lines), orDash(k.Owner),
					time.UnixMilli(k.CreatedAt).UTC().Format(time.RFC3339), agent, approvalColumn(k)})
			}
			return printTable(a.stdout, []string{"ID", "LABEL", "SCOPES", "LINES", "OWNER", "CREATED", "AGENT", "APPROVAL"}, rows)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the keys as a JSON array")
	return c
}

func (a *app) keysRevokeCommand() *cobra.Command {
	return a.idActionCommand(&cobra.Command{
		Use:     "revoke ID",
		Short:   "Revoke a key at once",
		Example: "  blueline keys revoke key_…",
	}, "/keys/revoke", "revoked", "revoked %s\n")
}

func scopeList(scopes []string) string {
	if len(scopes) == len(api.Scopes) {
		return "all"
	}
	return strings.Join(scopes, ",")
}

func orAll(lines []string) string {
	if len(lines) == 0 {
		return "all"
	}
	return strings.Join(lines, ",")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
