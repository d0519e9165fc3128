package main

import (
	"context"
	"errors"
	"io"
)

// Not built yet (issue 6): a hot backup through the admin socket, and a
// restore on a stopped daemon.
func cmdBackup(ctx context.Context, args []string, stdout io.Writer) error {
	return errors.New("backup is not built yet")
}

func cmdRestore(ctx context.Context, args []string, stdout io.Writer) error {
	return errors.New("restore is not built yet")
}
