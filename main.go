// Command blueline is the Blueline daemon and its admin commands.
//
//	blueline serve [--config FILE]
//	blueline keys create|list|revoke …
//	blueline sim inbound|reaction|typing|edit|unsend|read|group …
//	blueline sandbox
//	blueline version
//
// The commands are in package cli, the daemon's wiring in package daemon.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/blueline-app/blueline/cli"
)

// Stamped at build time with -ldflags "-X main.version=…".
var (
	version = "dev"
	commit  = "unknown"
	date    = "unknown"
)

func main() { os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr)) }

// run is the command line with args, until an interrupt or SIGTERM; its
// result is the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.Run(ctx, cli.Build{Version: version, Commit: commit, Date: date}, args, stdin, stdout, stderr)
}
