package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/client"
)

func (a *app) adminClient() (*adminsock.Client, error) {
	cfg, err := a.config()
	if err != nil {
		return nil, err
	}
	return adminsock.NewClient(cfg.DataDir()), nil
}

// adminDo makes an admin request and decodes its answer into out.
func (a *app) adminDo(ctx context.Context, method, path string, in, out any) error {
	c, err := a.adminClient()
	if err != nil {
		return err
	}
	return adminError(c.Do(ctx, method, path, in, out))
}

// adminError words a refusal of the admin socket for the command line: its
// code and message, as the daemon's log would.
func adminError(err error) error {
	if e, ok := errors.AsType[*client.Error](err); ok && e.Code != "" {
		return errors.New(e.Code + ": " + e.Message)
	}
	return err
}

// adminPrint makes an admin request and prints the answer as indented JSON.
func (a *app) adminPrint(ctx context.Context, method, path string, in any) error {
	var raw json.RawMessage
	if err := a.adminDo(ctx, method, path, in, &raw); err != nil {
		return err
	}
	return printRawJSON(a.stdout, raw)
}

// adminList gets a list ({"data": […]}) and returns its items both raw,
// for --json, and decoded into out (a pointer to a slice).
func (a *app) adminList(ctx context.Context, path string, out any) (json.RawMessage, error) {
	var page struct{ Data json.RawMessage }
	if err := a.adminDo(ctx, http.MethodGet, path, nil, &page); err != nil {
		return nil, err
	}
	if len(page.Data) == 0 || string(page.Data) == "null" {
		page.Data = json.RawMessage("[]")
	}
	return page.Data, json.Unmarshal(page.Data, out)
}

func printRawJSON(w io.Writer, raw json.RawMessage) error {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// printTable prints rows. On a terminal: aligned columns under a header.
// Otherwise, for scripts: one tab-separated line per row, no header. Every
// cell is printable: a tab or newline in one cannot break the table, nor a
// control reach the terminal.
func printTable(w io.Writer, header []string, rows [][]string) error {
	safe := make([][]string, len(rows))
	for i, r := range rows {
		safe[i] = make([]string, len(r))
		for j, cell := range r {
			safe[i][j] = printable(cell)
		}
	}
	rows = safe
	if !isTerminal(w) {
		for _, r := range rows {
			if _, err := fmt.Fprintln(w, strings.Join(r, "\t")); err != nil {
				return err
			}
		}
		return nil
	}
	return writeAligned(w, header, rows)
}

// writeAligned writes a header and rows in aligned columns.
func writeAligned(w io.Writer, header []string, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

func splitList(s string) []string {
	var out []string
	for _, v := range strings.Split(s, ",") {
		if v = strings.TrimSpace(v); v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}
