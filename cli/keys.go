package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/blueline-app/blueline/server"
)

func cmdKeys(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: keys needs create, list or revoke", errUsage)
	}
	fs := flag.NewFlagSet("keys "+args[0], flag.ContinueOnError)
	cfgPath := fs.String("config", "", "configuration file")
	switch args[0] {
	case "create":
		label := fs.String("label", "", "what the key is for")
		scopes := fs.String("scopes", "all", "all, or scope,scope,…")
		lines := fs.String("lines", "", "handles or line IDs the key is limited to")
		owner := fs.String("owner", "", "who the key belongs to")
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		if strings.TrimSpace(*label) == "" {
			return fmt.Errorf("%w: keys create needs --label", errUsage)
		}
		c, err := adminClient(*cfgPath)
		if err != nil {
			return err
		}
		var info server.KeyInfo
		req := server.KeyRequest{Label: *label, Scopes: *scopes, Lines: splitList(*lines), Owner: *owner}
		if err := c.Do(ctx, http.MethodPost, "/keys", req, &info); err != nil {
			return err
		}
		fmt.Fprintln(stdout, info.Secret)
	case "list":
		if err := parseNoArgs(fs, args[1:]); err != nil {
			return err
		}
		var keys struct{ Data []server.KeyInfo }
		if err := adminGet(ctx, *cfgPath, "/keys", &keys); err != nil {
			return err
		}
		for _, k := range keys.Data {
			fmt.Fprintf(stdout, "%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Label, scopeList(k.Scopes), orAll(k.Lines), orDash(k.Owner),
				time.UnixMilli(k.CreatedAt).UTC().Format(time.RFC3339))
		}
	case "revoke":
		id, err := adminPostID(ctx, fs, cfgPath, args[1:], "/keys/revoke")
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %s\n", id)
	default:
		return fmt.Errorf("%w: unknown keys command %q", errUsage, args[0])
	}
	return nil
}

func scopeList(scopes []string) string {
	if len(scopes) == len(server.Scopes) {
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
