// Package cli is the blueline command line: Run parses the arguments and
// runs one command. `serve` runs the daemon (package daemon) in the
// foreground; the admin commands talk to a running daemon through its admin
// socket; the service commands install and control the system service.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

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

const usage = `Blueline: a messaging API for the lines of a Mac host, or of a simulated network.

Usage:
  blueline serve   [--config FILE]      run the daemon in the foreground
  blueline keys create [--config FILE] --label TEXT [--scopes all|scope,…] [--lines HANDLE_OR_ID,…] [--owner NAME]
  blueline keys list   [--config FILE]
  blueline keys revoke [--config FILE] ID
  blueline sim inbound [--config FILE] --line HANDLE --from HANDLE [--text TEXT] [--attach PATH | --audio PATH [--transcription TEXT]]
                       [--chat cht_… | --group NAME --participants a,b,c]
  blueline sim reaction [--config FILE] --line HANDLE --from HANDLE --message MSG_ID_OR_GUID --type TYPE [--emoji EMOJI] [--remove]
  blueline sim typing [--config FILE] --line HANDLE --from HANDLE [--chat cht_…] [--state on|off]
  blueline sim edit [--config FILE] --line HANDLE --from HANDLE --message MSG_ID_OR_GUID --text TEXT
  blueline sim unsend [--config FILE] --line HANDLE --from HANDLE --message MSG_ID_OR_GUID
  blueline sim read [--config FILE] --line HANDLE --from HANDLE [--message MSG_ID_OR_GUID] [--delivered-only]
  blueline sim group [--config FILE] --line HANDLE --chat cht_… --by HANDLE
                     --add HANDLE | --remove HANDLE | --leave | --rename NAME | --photo | --remove-photo
  blueline sandbox [--owner NAME]       every owner's sandbox; --owner starts that owner's activation
  blueline webhooks list [--config FILE]
  blueline webhooks deliveries [--config FILE] [--webhook wh_…] [--delivery dlv_…] [--limit N]
  blueline webhooks redeliver [--config FILE] DELIVERY_ID
  blueline backup  [--config FILE] [--force] FILE   hot copy of the running daemon's database
  blueline restore [--config FILE] FILE             put a backup in place (daemon stopped)
  blueline install --config FILE [--user NAME]      install the system service
  blueline uninstall | start | stop | restart | status
  blueline version

Without --config, the embedded default is used: 127.0.0.1:8080, data in ./blueline-data,
a simulated sandbox line and one simulated line with advanced features.
`

// errUsage marks a command line that is wrong; it exits 2.
var errUsage = errors.New("usage")

// Run runs the command in args (os.Args[1:]) and returns its exit status:
// 0, 1 when it failed, 2 when the command line is wrong. serve runs until
// ctx is done.
func Run(ctx context.Context, build Build, args []string, stdout, stderr io.Writer) int {
	build = build.orDefaults()
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	var err error
	switch cmd, rest := args[0], args[1:]; cmd {
	case "serve":
		err = cmdServe(ctx, build, rest, stderr)
	case "keys":
		err = cmdKeys(ctx, rest, stdout)
	case "sim":
		err = cmdSim(ctx, rest, stdout)
	case "sandbox":
		err = cmdSandbox(ctx, rest, stdout)
	case "webhooks":
		err = cmdWebhooks(ctx, rest, stdout)
	case "backup":
		err = cmdBackup(ctx, rest, stdout)
	case "restore":
		err = cmdRestore(ctx, rest, stdout)
	case "install", "uninstall", "start", "stop", "restart", "status":
		err = cmdService(ctx, cmd, rest, stdout, stderr)
	case "version", "--version":
		fmt.Fprintf(stdout, "blueline %s (commit %s, built %s)\n", build.Version, build.Commit, build.Date)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
	default:
		err = fmt.Errorf("%w: unknown command %q", errUsage, cmd)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage) || errors.Is(err, flag.ErrHelp):
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintf(stderr, "blueline: %v\n\n", err)
		}
		fmt.Fprint(stderr, usage)
		return 2
	default:
		fmt.Fprintf(stderr, "blueline: %v\n", err)
		return 1
	}
}

// parseFlags parses flags wherever they stand among the positional
// arguments ("revoke ID --config F" as well as "revoke --config F ID").
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, fmt.Errorf("%w: %v", errUsage, err)
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}

// parseNoArgs parses a command's flags and refuses positional arguments.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	rest, err := parseFlags(fs, args)
	if err == nil && len(rest) > 0 {
		err = fmt.Errorf("%w: %s takes no argument %q", errUsage, fs.Name(), rest[0])
	}
	return err
}

func loadConfig(path string) (*config.Config, error) {
	if path == "" {
		return config.Default(), nil
	}
	return config.Load(path)
}
