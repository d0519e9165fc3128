// Package cli is the blueline command line, built on cobra: Run parses the
// arguments and runs one command. `serve` runs the daemon (package daemon)
// in the foreground; the admin commands talk to a running daemon through its
// admin socket; the service commands install and control the system service.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/config"
)

// Build is what the binary was built from, stamped by the linker into
// package main (-X main.version=…). A field left empty reads "dev" for the
// version, "unknown" for the others.
type Build struct {
	Version, Commit, Date string
}

func (b Build) orDefaults() Build {
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	if b.Date == "" {
		b.Date = "unknown"
	}
	return b
}

// errUsage marks a command line that is wrong; it exits 2 and points at
// the command's own --help.
var errUsage = errors.New("usage")

// usageErrorf is a usage error: the command line is wrong.
func usageErrorf(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{errUsage}, a...)...)
}

// env is what the command line reads from its surroundings, replaced in
// tests: the environment and the configuration of the installed service.
type env struct {
	getenv func(string) string
	// installedConfig is the configuration file the installed service runs
	// with, "" when no service is installed.
	installedConfig func() string
}

func osEnv() env {
	return env{getenv: os.Getenv, installedConfig: installedServiceConfig}
}

// app is one run of the command line: what every command shares.
type app struct {
	ctx            context.Context
	build          Build
	stdin          io.Reader // nil: none
	stdout, stderr io.Writer
	env            env
	configFlag     string // --config, a persistent flag
}

// Run runs the command in args (os.Args[1:]) with stdin (nil for none)
// and returns its exit status: 0, 1 when it failed, 2 when the command line
// is wrong. serve runs until ctx is done.
func Run(ctx context.Context, build Build, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return run(ctx, build, args, stdin, stdout, stderr, osEnv())
}

func run(ctx context.Context, build Build, args []string, stdin io.Reader, stdout, stderr io.Writer, e env) int {
	a := &app{ctx: ctx, build: build.orDefaults(), stdin: stdin, stdout: stdout, stderr: stderr, env: e}
	root := a.rootCommand()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	root.SetIn(stdin)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage) || isCobraUsageError(err):
		if cmd == nil || cmd.Name() == "help" {
			cmd = root
		}
		// The message and where the usage is, not the usage itself: a
		// screenful of flags would scroll the message out of sight.
		msg := strings.TrimSpace(strings.TrimPrefix(err.Error(), errUsage.Error()+": "))
		fmt.Fprintf(stderr, "blueline: %s\nRun '%s --help' for usage.\n", msg, cmd.CommandPath())
		return 2
	default:
		// An error may quote what a webhook's receiver answered: printable,
		// line by line (an error of ours may have several).
		lines := strings.Split(err.Error(), "\n")
		for i, l := range lines {
			lines[i] = printable(l)
		}
		fmt.Fprintf(stderr, "blueline: %s\n", strings.Join(lines, "\n"))
		if errors.Is(err, adminsock.ErrDaemonNotRunning) {
			fmt.Fprint(stderr, a.whereDaemonWasLooked())
		}
		return 1
	}
}

// isCobraUsageError recognises the errors cobra makes itself, before any
// command runs: an unknown command (with its suggestions).
func isCobraUsageError(err error) bool {
	return strings.HasPrefix(err.Error(), "unknown command ")
}

// rootCommand is the whole command tree.
func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "blueline",
		Short: "A messaging API for the lines of a Mac host, or of a simulated network",
		Long: `Blueline: a messaging API for the lines of a Mac host, or of a simulated network.

The configuration is, in this order: --config FILE, else $BLUELINE_CONFIG, else
the configuration of the installed service (the file ` + "`blueline install`" + ` was
given), else the embedded default: 127.0.0.1:8080, data in ./blueline-data, a
simulated sandbox line and one simulated line with advanced features.`,
		Example: `  blueline serve
  blueline keys create --label my-app --owner you@example.com
  blueline status
  blueline help keys create`,
		Version:       a.build.Version,
		SilenceErrors: true,
		SilenceUsage:  true,
		// No command: the usage, as a usage error.
		RunE: func(cmd *cobra.Command, args []string) error {
			return usageErrorf("which command?")
		},
	}
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetVersionTemplate(fmt.Sprintf("blueline %s (commit %s, built %s)\n", a.build.Version, a.build.Commit, a.build.Date))
	root.PersistentFlags().StringVar(&a.configFlag, "config", "", "configuration file (default: $BLUELINE_CONFIG, the installed service's, or the embedded default)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return fmt.Errorf("%w: %v", errUsage, err)
	})
	root.AddCommand(
		a.serveCommand(),
		a.keysCommand(),
		a.simCommand(),
		a.sandboxCommand(),
		a.webhooksCommand(),
		a.dashboardCommand(),
		a.mcpCommand(),
		a.backupCommand(),
		a.restoreCommand(),
		a.fleetCommand(),
	)
	// The API's client commands, as the reference service's CLI has them.
	root.AddCommand(
		a.listenCommand(), a.sendCommand(), a.reactCommand(), a.typingCommand(), a.readCommand(),
		a.linesCommand(), a.chatsCommand(), a.messagesCommand(), a.filesCommand(), a.outboxCommand(),
		a.contactsCommand(),
	)
	root.AddCommand(a.serviceCommands()...)
	root.AddCommand(a.statusCommand(), a.doctorCommand(), a.versionCommand())

	// cobra's own help and completion commands, with examples like ours.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		switch c.Name() {
		case "help":
			c.Example = "  blueline help keys create"
			// An unknown topic is a usage error (exit 2) with suggestions,
			// as an unknown command is; cobra's own prints the root's
			// usage and exits 0.
			c.Run = nil
			c.RunE = func(cmd *cobra.Command, args []string) error {
				target, rest, err := root.Find(args)
				if err != nil || target == nil || len(rest) > 0 {
					msg := fmt.Sprintf("unknown help topic %q", strings.Join(args, " "))
					if len(args) > 0 {
						if s := root.SuggestionsFor(args[len(args)-1]); len(s) > 0 {
							msg += "\n\nDid you mean this?\n\t" + strings.Join(s, "\n\t")
						}
					}
					return usageErrorf("%s", msg)
				}
				target.InitDefaultHelpFlag()
				return target.Help()
			}
		case "completion":
			c.Example = "  blueline completion bash > /etc/bash_completion.d/blueline\n  blueline completion zsh > \"${fpath[1]}/_blueline\"\n  blueline completion fish > ~/.config/fish/completions/blueline.fish"
			c.Args, c.SuggestionsMinimumDistance, c.RunE = cobra.ArbitraryArgs, 2, groupRunE("bash, zsh, fish or powershell")
			for _, sh := range c.Commands() {
				sh.Example = "  blueline completion " + sh.Name()
			}
		}
	}
	return root
}

// group is a command that only holds subcommands: without one, or with an
// unknown one, it is a usage error that suggests the nearest.
func group(use, short, example, subcommands string) *cobra.Command {
	return &cobra.Command{
		Use:                        use,
		Short:                      short,
		Example:                    example,
		Args:                       cobra.ArbitraryArgs,
		SuggestionsMinimumDistance: 2,
		RunE:                       groupRunE(subcommands),
	}
}

// groupRunE is the Run of a command that only holds subcommands.
func groupRunE(subcommands string) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) == 0 {
			return usageErrorf("%s needs a subcommand: %s", cmd.Name(), subcommands)
		}
		msg := fmt.Sprintf("unknown %s command %q (%s)", cmd.Name(), args[0], subcommands)
		if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return usageErrorf("%s", msg)
	}
}

// noArgs refuses positional arguments.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usageErrorf("%s takes no argument %q", cmd.CommandPath()[len("blueline "):], args[0])
	}
	return nil
}

// oneArg wants exactly one positional argument, what names.
func oneArg(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return usageErrorf("%s takes %s", cmd.CommandPath()[len("blueline "):], what)
		}
		return nil
	}
}

// Where the configuration came from, as status says it.
const (
	sourceFlag      = "--config"
	sourceEnv       = "BLUELINE_CONFIG"
	sourceInstalled = "the installed service"
	sourceDefault   = "the embedded default"
)

// configPath finds the configuration: --config, else $BLUELINE_CONFIG, else
// the installed service's, else "" (the embedded default). source says
// which.
func (a *app) configPath() (path, source string) {
	if a.configFlag != "" {
		return a.configFlag, sourceFlag
	}
	if p := a.env.getenv("BLUELINE_CONFIG"); p != "" {
		return p, sourceEnv
	}
	if p := a.env.installedConfig(); p != "" {
		return p, sourceInstalled
	}
	return "", sourceDefault
}

// whereDaemonWasLooked says how the configuration that named the socket
// nobody answers on was found: a daemon started with another one answers
// on another socket.
func (a *app) whereDaemonWasLooked() string {
	path, source := a.configPath()
	var b strings.Builder
	if path == "" {
		b.WriteString("The socket is that of the embedded default's data folder (no --config, no $BLUELINE_CONFIG, no installed service)")
	} else {
		fmt.Fprintf(&b, "The socket is that of the data folder of %s (from %s)", path, source)
	}
	if d := a.env.getenv(envData); d != "" {
		fmt.Fprintf(&b, ", replaced by $%s=%s", envData, d)
	}
	b.WriteString(".\nA daemon started with another configuration answers on its own: name its file with --config FILE or BLUELINE_CONFIG=FILE")
	if a.env.getenv(envData) == "" {
		b.WriteString(" (and, if it was started with --data DIR, set BLUELINE_DATA=DIR)")
	}
	b.WriteString(".\n")
	return b.String()
}

// config loads the configuration configPath finds, with $BLUELINE_LISTEN
// and $BLUELINE_DATA over its values: every command finds the daemon
// `serve` started in the same environment.
func (a *app) config() (*config.Config, error) {
	path, _ := a.configPath()
	return loadConfig(path, a.overrides("", "", false))
}

// Environment variables above the configuration file's values, below
// serve's flags.
const (
	envListen = "BLUELINE_LISTEN"
	envData   = "BLUELINE_DATA"
)

// overrides are serve's --listen, --data and --dev ("" and false for none)
// over the environment's values.
func (a *app) overrides(listen, data string, dev bool) config.Overrides {
	o := config.Overrides{Listen: listen, ListenSource: "--listen", DataDir: data, DataSource: "--data", Dev: dev}
	if o.Listen == "" {
		o.Listen, o.ListenSource = a.env.getenv(envListen), envListen
	}
	if o.DataDir == "" {
		o.DataDir, o.DataSource = a.env.getenv(envData), envData
	}
	return o
}

func loadConfig(path string, over config.Overrides) (*config.Config, error) {
	cfg := config.Default()
	if path != "" {
		var err error
		if cfg, err = config.Load(path); err != nil {
			return nil, err
		}
	}
	if err := cfg.Apply(over); err != nil {
		return nil, err
	}
	return cfg, nil
}

func (a *app) versionCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:     "version",
		Short:   "Print the version, commit and build date",
		Example: "  blueline version\n  blueline version --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			b := a.build
			if asJSON {
				return printJSON(a.stdout, map[string]string{"version": b.Version, "commit": b.Commit, "date": b.Date})
			}
			fmt.Fprintf(a.stdout, "blueline %s (commit %s, built %s)\n", b.Version, b.Commit, b.Date)
			return nil
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return c
}
