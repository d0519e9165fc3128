package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client"
)

// The contacts commands: a line's blocked list and its opted-out
// contacts, through the API (/v1/contacts/...).

func (a *app) contactsCommand() *cobra.Command {
	blocked := listGroup("blocked", "List, block, unblock, export or import a line's blocked contacts",
		"  blueline contacts blocked list --line +15550000001\n  blueline contacts blocked add --line +15550000001 +15551234567\n"+
			"  blueline contacts blocked export --line +15550000001 > blocked.csv\n  blueline contacts blocked import --line +15550000002 blocked.csv",
		"list, add, remove, export or import", a.blockedListCommand(), a.blockedAddCommand(), a.blockedRemoveCommand(),
		a.blockedExportCommand(), a.blockedImportCommand())
	optedOut := listGroup("opted-out", "List the contacts opted out of a line's messages",
		"  blueline contacts opted-out list --line +15550000001", "list", a.optedOutListCommand())
	return listGroup("contacts", "A line's blocked contacts and the contacts opted out of its messages",
		"  blueline contacts blocked list --line +15550000001\n  blueline contacts opted-out list --line +15550000001",
		"blocked or opted-out", blocked, optedOut)
}

// lineFlag is the --line of a contacts command, which needs it.
type lineFlag struct{ line string }

func (l *lineFlag) add(c *cobra.Command) {
	c.Flags().StringVar(&l.line, "line", "", "the line: its handle or ln_ ID (required)")
}

// check refuses a command without --line.
func (l *lineFlag) check(c *cobra.Command) error {
	if l.line == "" {
		return usageErrorf("%s needs --line (see `blueline lines list`)", c.CommandPath()[len("blueline "):])
	}
	return nil
}

func (a *app) blockedListCommand() *cobra.Command {
	var f apiFlags
	var p pageFlags
	var l lineFlag
	c := &cobra.Command{
		Use:   "list --line HANDLE [--limit N] [--cursor CURSOR]",
		Short: "List a line's blocked contacts, in handle order",
		Long: `List one page of a line's blocked contacts, in handle order: handle and when it
was blocked. When more follow, the next page's cursor is printed on stderr.
--json prints the API's page.`,
		Example: "  blueline contacts blocked list --line +15550000001\n  blueline contacts blocked list --line +15550000001 --json",
		Args:    noArgs,
	}
	c.RunE = a.apiRun(&f, func(ctx context.Context, conn *apiConn, args []string) error {
		if err := l.check(c); err != nil {
			return err
		}
		page, err := conn.Blocked.ListPage(ctx, client.BlockedListParams{From: l.line, Limit: p.limit, Cursor: p.cursor})
		if err != nil {
			return err
		}
		rows := make([][]string, 0, len(page.Data))
		for _, bc := range page.Data {
			rows = append(rows, []string{bc.Handle, msTime(bc.CreatedAt)})
		}
		return a.printList(f.json, nonNilPage(page), []string{"HANDLE", "BLOCKED"}, rows, client.NextCursor(page))
	})
	f.add(c)
	p.add(c)
	l.add(c)
	return c
}

func (a *app) blockedAddCommand() *cobra.Command {
	return a.blockedChangeCommand(&cobra.Command{
		Use:   "add --line HANDLE CONTACT",
		Short: "Block a contact on a line",
		Long: `Block a contact (a phone number or e-mail handle, in any common format) on a
line: its messages are stored with no event, and the line sends it nothing
(contact_blocked). A contact blocked already stays as it was.`,
		Example: "  blueline contacts blocked add --line +15550000001 \"+1 555 123 4567\"",
	}, func(ctx context.Context, conn *apiConn, line, contact string) (any, error) {
		return conn.Blocked.Block(ctx, line, contact)
	})
}

func (a *app) blockedRemoveCommand() *cobra.Command {
	return a.blockedChangeCommand(&cobra.Command{
		Use:     "remove --line HANDLE CONTACT",
		Aliases: []string{"rm"},
		Short:   "Unblock a contact on a line",
		Long: `Remove a contact from a line's blocked list (contact_not_blocked when it is not
on it). What it sent while blocked makes no event later.`,
		Example: "  blueline contacts blocked remove --line +15550000001 +15551234567",
	}, func(ctx context.Context, conn *apiConn, line, contact string) (any, error) {
		return conn.Blocked.Unblock(ctx, line, contact)
	})
}

// blockedChangeCommand is a command that changes one contact's entry on a
// line's blocked list (--line, CONTACT): call makes the change, and the
// command prints its answer.
func (a *app) blockedChangeCommand(c *cobra.Command, call func(ctx context.Context, conn *apiConn, line, contact string) (any, error)) *cobra.Command {
	var f apiFlags
	var l lineFlag
	c.Args = exactArgs(1, "CONTACT")
	c.RunE = a.apiRun(&f, func(ctx context.Context, conn *apiConn, args []string) error {
		if err := l.check(c); err != nil {
			return err
		}
		v, err := call(ctx, conn, l.line, args[0])
		return a.printAnswer(f, v, err)
	})
	f.add(c)
	l.add(c)
	return c
}

func (a *app) blockedExportCommand() *cobra.Command {
	var f apiFlags
	var l lineFlag
	c := &cobra.Command{
		Use:   "export --line HANDLE",
		Short: "Print a line's whole blocked list as CSV",
		Long: `Print a line's whole blocked list as CSV on stdout: a header row "handle", then
one handle per row, as import reads it.`,
		Example: "  blueline contacts blocked export --line +15550000001 > blocked.csv",
		Args:    noArgs,
	}
	c.RunE = a.apiRun(&f, func(ctx context.Context, conn *apiConn, args []string) error {
		if err := l.check(c); err != nil {
			return err
		}
		csv, err := conn.Blocked.Export(ctx, l.line)
		if err != nil {
			return err
		}
		_, err = a.stdout.Write(csv)
		return err
	})
	f.add(c)
	l.add(c)
	return c
}

func (a *app) blockedImportCommand() *cobra.Command {
	var f apiFlags
	var l lineFlag
	c := &cobra.Command{
		Use:   "import --line HANDLE FILE|-",
		Short: "Block the contacts of a CSV file on a line",
		Long: `Block the handles of a CSV file (- reads it from stdin) on a line, in one
transaction: the column named "handle" of its header row, else its first
column. Prints how many were added, how many the file holds, and each row
without a valid handle, by its number in the file, with why.`,
		Example: "  blueline contacts blocked import --line +15550000002 blocked.csv\n" +
			"  blueline contacts blocked export --line +15550000001 | blueline contacts blocked import --line +15550000002 -",
		Args: exactArgs(1, "FILE (or - for stdin)"),
	}
	c.RunE = a.apiRun(&f, func(ctx context.Context, conn *apiConn, args []string) error {
		if err := l.check(c); err != nil {
			return err
		}
		var body io.Reader
		if args[0] == "-" {
			if body = a.pipedStdin(); body == nil {
				return usageErrorf("- reads the file from stdin, which is a terminal")
			}
		} else {
			file, err := os.Open(args[0])
			if err != nil {
				return err
			}
			defer file.Close()
			body = file
		}
		imp, err := conn.Blocked.Import(ctx, l.line, body)
		if err != nil || f.json {
			return a.printAnswer(f, imp, err)
		}
		fmt.Fprintf(a.stdout, "added %d, blocked %d, rejected %d\n", imp.Added, imp.Blocked, len(imp.Rejected))
		for _, r := range imp.Rejected {
			fmt.Fprintf(a.stdout, "row %d %q: %s\n", r.Row, r.Value, r.Message)
		}
		return nil
	})
	f.add(c)
	l.add(c)
	return c
}

func (a *app) optedOutListCommand() *cobra.Command {
	var f apiFlags
	var p pageFlags
	var l lineFlag
	c := &cobra.Command{
		Use:   "list --line HANDLE [--limit N] [--cursor CURSOR]",
		Short: "List the contacts opted out of a line's messages, in handle order",
		Long: `List one page of the contacts opted out of a line's messages (they texted one of
its opt-out keywords), in handle order: handle, when, and the word they wrote.
When more follow, the next page's cursor is printed on stderr. --json prints
the API's page.`,
		Example: "  blueline contacts opted-out list --line +15550000001",
		Args:    noArgs,
	}
	c.RunE = a.apiRun(&f, func(ctx context.Context, conn *apiConn, args []string) error {
		if err := l.check(c); err != nil {
			return err
		}
		page, err := conn.OptedOut.ListPage(ctx, client.BlockedListParams{From: l.line, Limit: p.limit, Cursor: p.cursor})
		if err != nil {
			return err
		}
		rows := make([][]string, 0, len(page.Data))
		for _, o := range page.Data {
			rows = append(rows, []string{o.Handle, msTime(o.OptedOutAt), truncate(orNil(o.Word), 40)})
		}
		return a.printList(f.json, nonNilPage(page), []string{"HANDLE", "OPTED OUT", "WORD"}, rows, client.NextCursor(page))
	})
	f.add(c)
	p.add(c)
	l.add(c)
	return c
}
