package cli

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client"
	"github.com/blueline-app/blueline/client/api"
)

func (a *app) sandboxCommand() *cobra.Command {
	var owner string
	c := &cobra.Command{
		Use:   "sandbox [--owner NAME]",
		Short: "Print every owner's sandbox as JSON; show (status) or activate one owner's",
		Long: `Print the sandbox line as JSON: handle, line_id, and owners, each owner's
sandbox (every owner of a key, and every owner that started one) as
GET /v1/sandbox answers it plus owner. With --owner, start that owner's
activation (as POST /v1/sandbox does) and print it.

` + "`sandbox status`" + ` and ` + "`sandbox activate`" + ` show and activate one owner's sandbox,
on the host (--owner) or over the network (--base-url, the key's owner).`,
		Example: "  blueline sandbox\n  blueline sandbox --owner you@example.com\n  blueline sandbox status --owner you@example.com\n  blueline sandbox activate --owner you@example.com",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if owner != "" {
				return a.adminPrint(cmd.Context(), http.MethodPost, "/sandbox", map[string]string{"owner": owner})
			}
			return a.adminPrint(cmd.Context(), http.MethodGet, "/sandbox", nil)
		},
	}
	c.Flags().StringVar(&owner, "owner", "", "start (or show) this owner's activation")
	c.AddCommand(a.sandboxStatusCommand(), a.sandboxActivateCommand())
	return c
}

// needOwner refuses a sandbox command on the host without --owner: a
// sandbox is an owner's.
func needOwner(c *apiConn, f *apiFlags, command string) error {
	if c.local && f.owner == "" {
		return usageErrorf("%s needs --owner NAME on the host: a sandbox is a key owner's", command)
	}
	return nil
}

func (a *app) sandboxStatusCommand() *cobra.Command {
	var f apiFlags
	c := &cobra.Command{
		Use:   "status [--owner NAME]",
		Short: "Show a sandbox's state, paired number and today's usage",
		Long: `Show the sandbox of the key's owner (on the host, of --owner): missing,
pending (with the code to text to the sandbox line) or active (with the
number it is paired with), and today's usage of its daily quota.`,
		Example: "  blueline sandbox status --owner you@example.com\n  BLUELINE_API_KEY=sk_live_… blueline sandbox status --base-url https://blueline.example.com --json",
		Args:    noArgs,
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			if err := needOwner(c, &f, "sandbox status"); err != nil {
				return err
			}
			s, err := c.Sandbox.Get(ctx)
			if err != nil {
				return err
			}
			if f.json {
				return printJSON(a.stdout, s)
			}
			a.printSandbox(s)
			return nil
		}),
	}
	f.add(c)
	return c
}

// sandboxPoll is how often sandbox activate asks whether the code came.
const sandboxPoll = time.Second

func (a *app) sandboxActivateCommand() *cobra.Command {
	var f apiFlags
	var timeout time.Duration
	var noWait bool
	c := &cobra.Command{
		Use:   "activate [--owner NAME] [--timeout 5m] [--no-wait]",
		Short: "Start a sandbox, print its code, and wait for it to be texted",
		Long: `Start the sandbox of the key's owner (on the host, of --owner) if needed, print
the activation code to text to the sandbox line, and wait until a phone has
texted it (the sandbox is then paired with that number), at most --timeout;
--no-wait returns at once. With --json, the sandbox is printed as JSON when
started and again once active. Exits 1 when the wait times out.`,
		Example: "  blueline sandbox activate --owner you@example.com\n  BLUELINE_API_KEY=sk_live_… blueline sandbox activate --base-url https://blueline.example.com --json",
		Args:    noArgs,
		RunE: a.apiRun(&f, func(ctx context.Context, c *apiConn, args []string) error {
			if err := needOwner(c, &f, "sandbox activate"); err != nil {
				return err
			}
			s, err := c.Sandbox.Start(ctx)
			if err != nil {
				return err
			}
			if f.json {
				if err := printJSON(a.stdout, s); err != nil {
					return err
				}
			} else if s.Status == client.SandboxActive {
				fmt.Fprintln(a.stdout, "Sandbox already active.")
				a.printSandbox(s)
			} else {
				fmt.Fprintf(a.stdout, "Activate your sandbox: text %s to %s from your phone.\n", orNil(s.ActivationCode), s.SandboxLineHandle)
			}
			if s.Status == client.SandboxActive || noWait {
				return nil
			}
			if !f.json {
				fmt.Fprintln(a.stdout, "Waiting for the code… (Ctrl-C to stop)")
			}
			ctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			tick := time.NewTicker(sandboxPoll)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					if ctx.Err() == context.DeadlineExceeded {
						return fmt.Errorf("the code was not texted within %s; see `blueline sandbox status`", timeout)
					}
					return nil
				case <-tick.C:
				}
				s, err = c.Sandbox.Get(ctx)
				if err != nil {
					if ctx.Err() != nil {
						continue
					}
					return err
				}
				if s.Status == client.SandboxActive {
					if f.json {
						return printJSON(a.stdout, s)
					}
					a.printSandbox(s)
					return nil
				}
			}
		}),
	}
	f.add(c)
	c.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "how long to wait for the code")
	c.Flags().BoolVar(&noWait, "no-wait", false, "print the code and return without waiting")
	return c
}

// printSandbox prints a sandbox's state for people.
func (a *app) printSandbox(s *api.Sandbox) {
	w := a.stdout
	switch s.Status {
	case client.SandboxMissing:
		fmt.Fprintln(w, "No sandbox yet: `blueline sandbox activate` starts one.")
		fmt.Fprintf(w, "    sandbox line  %s\n", s.SandboxLineHandle)
		return
	case client.SandboxPending:
		fmt.Fprintln(w, "Sandbox pending activation")
		fmt.Fprintf(w, "    code          %s\n", orNil(s.ActivationCode))
		fmt.Fprintf(w, "    text it to    %s\n", s.SandboxLineHandle)
	default:
		fmt.Fprintln(w, "Sandbox active")
		fmt.Fprintf(w, "    sandbox line  %s\n", s.SandboxLineHandle)
		fmt.Fprintf(w, "    paired with   %s\n", printable(orNil(s.ContactIdentifier)))
	}
	u := s.Usage
	fmt.Fprintf(w, "    usage today   %d/%d (resets %s)\n", u.Used, u.Limit, msTime(u.ResetsAt))
}
