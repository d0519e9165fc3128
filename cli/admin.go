package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/blueline-app/blueline/server"
)

func adminClient(cfgPath string) (*server.AdminClient, error) {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return nil, err
	}
	return server.NewAdminClient(cfg.DataDir()), nil
}

// adminGet decodes the answer to an admin GET into out.
func adminGet(ctx context.Context, cfgPath, path string, out any) error {
	c, err := adminClient(cfgPath)
	if err != nil {
		return err
	}
	return c.Do(ctx, http.MethodGet, path, nil, out)
}

// adminPostID posts {"id": ID} to an admin path, ID being the command's one
// positional argument.
func adminPostID(ctx context.Context, fs *flag.FlagSet, cfgPath *string, args []string, path string) (string, error) {
	rest, err := parseFlags(fs, args)
	if err != nil {
		return "", err
	}
	if len(rest) != 1 {
		return "", fmt.Errorf("%w: %s takes one ID", errUsage, fs.Name())
	}
	c, err := adminClient(*cfgPath)
	if err != nil {
		return "", err
	}
	return rest[0], c.Do(ctx, http.MethodPost, path, map[string]string{"id": rest[0]}, nil)
}

// adminPrint makes an admin request and prints the answer as indented JSON.
func adminPrint(ctx context.Context, cfgPath, method, path string, in any, w io.Writer) error {
	c, err := adminClient(cfgPath)
	if err != nil {
		return err
	}
	var raw json.RawMessage
	if err := c.Do(ctx, method, path, in, &raw); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err = w.Write(buf.Bytes())
	return err
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
