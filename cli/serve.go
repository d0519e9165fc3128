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
	var listen, data string
	var dev bool
	c := &cobra.Command{
		Use:   "serve [--listen ADDR] [--data DIR] [--dev]",
		Short: "Run the daemon in the foreground",
		Long: `Run the daemon in the foreground until SIGINT or SIGTERM, then shut it down
within 10 s. The configuration is --config, else $BLUELINE_CONFIG, else the
installed service's, else the embedded default. A file need only hold what
differs from the embedded default: without [[lines]] and [sandbox] it keeps
the default's simulated lines.

--listen and --data (else $BLUELINE_LISTEN and $BLUELINE_DATA) replace the
configuration's [server] listen and [storage] dir. The other commands read the
same environment variables to find the daemon; after --data, give them
BLUELINE_DATA.

--dev is for developing against the daemon on this machine: webhooks may
post to http:// receivers and to loopback and private addresses (the
[webhooks] allow_http and allow_private_networks settings). It is refused with
[tls] or a listen address other machines can reach.`,
		Example: `  blueline serve
  blueline serve --config /etc/blueline/blueline.toml
  BLUELINE_CONFIG=./blueline.toml blueline serve
  blueline serve --listen 127.0.0.1:9090 --data ./other-data
  blueline serve --dev`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			path, _ := a.configPath()
			// The same program the system service runs (service.go).
			return runProgram(cmd.Context(), newProgram(path, a.overrides(listen, data, dev), a.build, a.stderr))
		},
	}
	fl := c.Flags()
	fl.StringVar(&listen, "listen", "", "the API's host:port, instead of [server] listen (default: $"+envListen+", else the configuration's)")
	fl.StringVar(&data, "data", "", "the data folder, instead of [storage] dir (default: $"+envData+", else the configuration's)")
	fl.BoolVar(&dev, "dev", false, "allow webhooks to http:// and local receivers, for development on this machine")
	return c
}

// serve runs the daemon until ctx is done, then shuts it down within
// daemon.ShutdownTimeout: requests in flight finish, the workers stop, bbolt
// is closed. It is the one code path of `serve` in a terminal and of the
// system service.
func serve(ctx context.Context, cfgPath string, over config.Overrides, build Build, stderr io.Writer) error {
	cfg, err := loadConfig(cfgPath, over)
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
	if cfg.DefaultLines {
		log.Info("the configuration names no [[lines]] and no [sandbox]: serving the embedded default's simulated lines",
			"config", cfgPath, "sandbox", cfg.Sandbox.Handle, "lines", len(cfg.Lines))
	}
	if cfg.Dev {
		log.Warn("DEVELOPMENT MODE (--dev): webhooks may post to http:// and to this machine's own and private networks; never run a daemon others use this way",
			"listen", d.Addr().String())
	}
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
