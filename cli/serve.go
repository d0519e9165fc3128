package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/daemon"
)

func (a *app) serveCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "serve",
		Short: "Run the daemon in the foreground",
		Long: `Run the daemon in the foreground until SIGINT or SIGTERM, then shut it down
within 10 s. The configuration is --config, else $BLUELINE_CONFIG, else the
installed service's, else the embedded default.`,
		Example: `  blueline serve
  blueline serve --config /etc/blueline/blueline.toml
  BLUELINE_CONFIG=./blueline.toml blueline serve`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, _ := a.configPath()
			// The same program the system service runs (service.go).
			return runProgram(cmd.Context(), newProgram(path, a.build, a.stderr))
		},
	}
}

// serve runs the daemon until ctx is done, then shuts it down within
// daemon.ShutdownTimeout: requests in flight finish, the workers stop, bbolt
// is closed. It is the one code path of `serve` in a terminal and of the
// system service.
func serve(ctx context.Context, cfgPath string, build Build, stderr io.Writer) error {
	cfg, err := loadConfig(cfgPath)
	if err != nil {
		return err
	}
	log := newLogger(cfg.Log, stderr)
	d, err := daemon.Start(ctx, cfg, log, daemon.WithVersion(build.Version))
	if err != nil {
		return err
	}
	log.Info("blueline serving", "version", build.Version, "listen", d.Addr().String(), "data", cfg.DataDir(),
		"admin_socket", adminsock.Path(cfg.DataDir()), "lines", len(d.Lines()))
	if has, err := d.HasKeys(ctx); err == nil && !has {
		flagCfg := ""
		if cfgPath != "" {
			flagCfg = " --config " + cfgPath
		}
		fmt.Fprintf(stderr, "\nNo API key exists yet. In another terminal, create one:\n\n  blueline keys create%s --label my-app --owner you@example.com\n\n", flagCfg)
	}
	return d.Run(ctx)
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	level.UnmarshalText([]byte(c.Level)) // validated by config
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
