package daemon

import (
	"context"
	"time"

	"github.com/blueline-app/blueline/fleet"
	"github.com/blueline-app/blueline/fleet/control"
	"github.com/blueline-app/blueline/storage"
)

// startControl shares this host's control records (keys, webhooks,
// sandbox owners, console sessions) with its fleet, before anything
// serves: it joins the fleet (seeds it, reconciles with it, or refuses to
// start, saying why) and replicates until Shutdown. Nothing without
// [fleet].
func (d *Daemon) startControl(ctx context.Context, undo *[]func() error) error {
	if d.fleet == nil {
		return nil
	}
	c, err := control.Start(ctx, d.fleet, d.db, control.Options{Logger: d.log})
	if err != nil {
		return err
	}
	d.control = c
	*undo = append(*undo, func() error { d.stopControl(context.Background()); return nil })
	return nil
}

// stopControl stops the replication, writing the last local changes to
// the fleet first (within a few seconds, or until ctx ends).
func (d *Daemon) stopControl(ctx context.Context) {
	if d.control == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d.control.Stop(ctx)
	d.control = nil
}

// fleetLines finds the lines of the fleet's other hosts in its line
// directory, for the admin commands (a key limited to them).
type fleetLines struct{ node *fleet.Node }

func (f fleetLines) entries(ctx context.Context) []fleet.LineEntry {
	dir, err := f.node.Directory(fleet.DirectoryOptions{})
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	entries, _ := dir.Lines(ctx)
	return entries
}

// LineByHandle is the ID of the fleet's line with this handle.
func (f fleetLines) LineByHandle(ctx context.Context, handle string) (string, bool) {
	for _, e := range f.entries(ctx) {
		if e.Handle == handle {
			return e.Line, true
		}
	}
	return "", false
}

// LineHandle is the handle of the fleet's line with this ID.
func (f fleetLines) LineHandle(ctx context.Context, id string) (string, bool) {
	for _, e := range f.entries(ctx) {
		if e.Line == id {
			return e.Handle, true
		}
	}
	return "", false
}

// Sandbox is an owner's sandbox state as this host has it (ok is false
// when the owner has started none): in a fleet, every host has every
// owner's, whichever host serves the sandbox line.
func (d *Daemon) Sandbox(ctx context.Context, owner string) (st storage.SandboxState, ok bool, err error) {
	return d.db.Sandbox(ctx, owner)
}
