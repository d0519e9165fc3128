package main

import (
	"context"
	"errors"
	"io"
)

// Not built yet (issue 6): installing and controlling the system service.
func cmdService(ctx context.Context, action string, args []string, stdout, stderr io.Writer) error {
	return errors.New(action + " is not built yet")
}
