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

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Run(ctx, cli.Build{Version: version, Commit: commit, Date: date}, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
