package cli

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/blueline-app/blueline/client/api"
)

func (a *app) dashboardCommand() *cobra.Command {
	var owner string
	var noOpen, asJSON bool
	c := &cobra.Command{
		Use:   "dashboard [--owner NAME] [--no-open]",
		Short: "Print a one-time sign-in link to the web console, and open it",
		Long: `Print a one-time link that signs a browser in to the web console (served
under /dashboard/ on the API's address), valid for five minutes and good for
one sign-in. On a terminal with a desktop, the link is also opened in the
browser.

Without --owner the session is the host's operator's: it sees and does
everything. With --owner it sees what a key of that owner sees (the owner's
sandbox, keys and webhooks), by the same rules as the API.

Sessions last [dashboard] session_ttl (12h by default). ` + "`blueline dashboard password`" + `
sets a password for signing in without a link over HTTPS.`,
		Example: "  blueline dashboard\n  blueline dashboard --owner you@example.com --no-open\n  blueline dashboard password",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var link struct {
				URL       string `json:"url"`
				ExpiresAt int64  `json:"expires_at"`
				Owner     string `json:"owner"`
			}
			if err := a.adminDo(cmd.Context(), http.MethodPost, "/dashboard/link", map[string]string{"owner": owner}, &link); err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.stdout, link)
			}
			fmt.Fprintln(a.stdout, link.URL)
			if !noOpen && isTerminal(a.stdout) {
				if err := openBrowser(cmd.Context(), link.URL); err == nil {
					fmt.Fprintln(a.stderr, "opened in your browser")
				}
			}
			fmt.Fprintf(a.stderr, "valid once, until %s\n", time.UnixMilli(link.ExpiresAt).Format(time.Kitchen))
			return nil
		},
	}
	f := c.Flags()
	f.StringVar(&owner, "owner", "", "sign in as this owner instead of the host's operator")
	f.BoolVar(&noOpen, "no-open", false, "only print the link")
	f.BoolVar(&asJSON, "json", false, "print the link and its expiry as JSON")
	c.AddCommand(a.dashboardPasswordCommand(), a.dashboardSessionsCommand(), a.dashboardSignOutCommand())
	return c
}

// openBrowser opens url in the desktop's browser, when there is a desktop.
func openBrowser(ctx context.Context, url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.CommandContext(ctx, "open", url)
	case "linux":
		if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
			return fmt.Errorf("no desktop")
		}
		cmd = exec.CommandContext(ctx, "xdg-open", url)
	default:
		return fmt.Errorf("no known way to open a browser on %s", runtime.GOOS)
	}
	return cmd.Run()
}

func (a *app) dashboardPasswordCommand() *cobra.Command {
	var remove bool
	c := &cobra.Command{
		Use:   "password [--remove]",
		Short: "Set the console's password (read from stdin), or remove it",
		Long: `Set the password that signs the host's operator in to the console without a
login link: at least 12 characters, asked for on a terminal (not echoed) or
read from the first line of stdin. It is stored as a bcrypt hash. The login
page offers it over HTTPS, and on the host itself; failed attempts are
limited (5 per address, 50 in all, per 15 minutes).

--remove removes it: then only login links sign in.`,
		Example: "  blueline dashboard password\n  printf '%s\\n' \"$PASSWORD\" | blueline dashboard password\n  blueline dashboard password --remove",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			pw := ""
			if !remove {
				var err error
				if pw, err = readPassword(cmd.InOrStdin(), a.stderr); err != nil {
					return err
				}
				if pw == "" {
					return usageErrorf("dashboard password needs a password on stdin (or --remove)")
				}
			}
			if err := a.adminDo(cmd.Context(), http.MethodPost, "/dashboard/password", map[string]string{"password": pw}, nil); err != nil {
				return err
			}
			if remove {
				fmt.Fprintln(a.stdout, "password removed: only login links sign in")
			} else {
				fmt.Fprintln(a.stdout, "password set")
			}
			return nil
		},
	}
	c.Flags().BoolVar(&remove, "remove", false, "remove the password")
	return c
}

// readPassword asks on a terminal without echo, else reads stdin's first
// line.
func readPassword(in io.Reader, prompt io.Writer) (string, error) {
	if f, ok := in.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		fmt.Fprint(prompt, "Password: ")
		b, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(prompt)
		return string(b), err
	}
	line, err := bufio.NewReader(io.LimitReader(in, 4096)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", err
	}
	return strings.TrimRight(line, "\r\n"), nil
}

func (a *app) dashboardSessionsCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "sessions",
		Short:   "List the browsers signed in to the console",
		Example: "  blueline dashboard sessions\n  blueline dashboard sessions --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var sessions []api.SessionInfo
			raw, err := a.adminList(cmd.Context(), "/dashboard/sessions", &sessions)
			if err != nil {
				return err
			}
			if asJSON {
				return printRawJSON(a.stdout, raw)
			}
			rows := make([][]string, 0, len(sessions))
			for _, s := range sessions {
				rows = append(rows, []string{s.ID, orDash(s.Owner), s.Via,
					time.UnixMilli(s.CreatedAt).UTC().Format(time.RFC3339), time.UnixMilli(s.ExpiresAt).UTC().Format(time.RFC3339)})
			}
			return printTable(a.stdout, []string{"ID", "OWNER", "VIA", "CREATED", "EXPIRES"}, rows)
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the sessions as a JSON array")
	return c
}

func (a *app) dashboardSignOutCommand() *cobra.Command {
	var all bool
	c := &cobra.Command{
		Use:     "signout SESSION_ID | --all",
		Short:   "End a console session, or all of them",
		Example: "  blueline dashboard signout ses_…\n  blueline dashboard signout --all",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usageErrorf("dashboard signout takes one session ID")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if all == (len(args) == 1) {
				return usageErrorf("dashboard signout needs a session ID or --all")
			}
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			var res struct {
				Ended int `json:"ended"`
			}
			if err := a.adminDo(cmd.Context(), http.MethodPost, "/dashboard/sessions/end", map[string]string{"id": id}, &res); err != nil {
				return err
			}
			fmt.Fprintf(a.stdout, "%d session(s) ended\n", res.Ended)
			return nil
		},
	}
	c.Flags().BoolVar(&all, "all", false, "end every session")
	return c
}
