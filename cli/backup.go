package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/adminsock"
	"github.com/blueline-app/blueline/storage"
)

// cmdBackup writes a consistent copy of the running daemon's database to
// FILE: streamed over the admin socket into a temporary file beside FILE,
// synced, checked, then renamed, so FILE is never a partial copy.
func (a *app) backupCommand() *cobra.Command {
	var force bool
	c := &cobra.Command{
		Use:   "backup [--force] FILE",
		Short: "Write a consistent copy of the running daemon's database to FILE",
		Long: `Write a consistent copy of the running daemon's database to FILE (mode 0600)
and print its size. An existing FILE is refused without --force. Uploaded
files are not in it: copy the data folder's files folder too.`,
		Example: `  blueline backup /var/backups/blueline.bolt
  blueline backup --force ./blueline.bolt`,
		Args: oneArg("one FILE to write"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.backup(cmd.Context(), args[0], force)
		},
	}
	c.Flags().BoolVar(&force, "force", false, "replace FILE if it exists")
	return c
}

func (a *app) backup(ctx context.Context, target string, force bool) error {
	stdout := a.stdout
	if !force {
		if _, err := os.Lstat(target); err == nil {
			return fmt.Errorf("%s exists: choose another name, or pass --force to replace it", target)
		}
	}
	cfg, err := a.config()
	if err != nil {
		return err
	}
	body, err := adminsock.NewClient(cfg.DataDir()).Stream(ctx, "/backup")
	if err != nil {
		return adminError(err)
	}
	defer body.Close()
	n, err := writeBackup(body, target, force)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(stdout, "wrote %s (%d bytes): a copy of the database as of now\n", target, n)
	fmt.Fprintf(stdout, "uploaded files are not in it: copy the folder %s too\n", filepath.Join(cfg.DataDir(), "files"))
	return nil
}

// writeBackup copies r into a temporary file beside target (mode 0600: the
// database holds webhook secrets), syncs it, checks that it opens as our
// database, and moves it to target. On any error the temporary file is
// removed and target is untouched.
func writeBackup(r io.Reader, target string, force bool) (n int64, err error) {
	dir := filepath.Dir(target)
	tmp, err := os.CreateTemp(dir, filepath.Base(target)+".*.tmp")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if n, err = io.Copy(tmp, r); err != nil {
		return n, fmt.Errorf("receive the copy: %w", err)
	}
	if err = tmp.Sync(); err != nil {
		return n, err
	}
	if err = tmp.Close(); err != nil {
		return n, err
	}
	if err = storage.CheckBackup(tmp.Name()); err != nil {
		return n, fmt.Errorf("the copy received does not check: %w", err)
	}
	if err = moveInto(tmp.Name(), target, force); err != nil {
		return n, err
	}
	return n, storage.SyncDir(dir)
}

// moveInto renames src to dst; without force, never over an existing dst
// (a hard link fails if dst exists, where a rename would replace it).
func moveInto(src, dst string, force bool) error {
	if force {
		return os.Rename(src, dst)
	}
	err := os.Link(src, dst)
	switch {
	case err == nil:
		return os.Remove(src)
	case errors.Is(err, os.ErrExist):
		return fmt.Errorf("%s appeared meanwhile: not replaced (pass --force to replace it)", dst)
	}
	// No hard links on this file system: check, then rename.
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("%s appeared meanwhile: not replaced (pass --force to replace it)", dst)
	}
	return os.Rename(src, dst)
}

// cmdRestore puts a backup in place of the database of a stopped daemon,
// keeping the database it replaces.
func (a *app) restoreCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "restore FILE",
		Short: "Put a backup in place of the database of a stopped daemon",
		Long: `On a stopped daemon, put the backup FILE in place of the database, keeping
the one it replaces as db.bolt.before-restore-<time>.`,
		Example: "  blueline stop && blueline restore /var/backups/blueline.bolt && blueline start",
		Args:    oneArg("one backup FILE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.restore(args[0])
		},
	}
}

func (a *app) restore(file string) error {
	stdout := a.stdout
	rest := []string{file}
	cfg, err := a.config()
	if err != nil {
		return err
	}
	dir := cfg.DataDir()
	socket := adminsock.Path(dir)
	if c, err := net.DialTimeout("unix", socket, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("the daemon is running (it answers on %s): stop it first, then restore", socket)
	}
	res, err := storage.Restore(dir, rest[0], time.Now())
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	fmt.Fprintf(stdout, "restored %s (%d bytes) as %s\n", rest[0], res.Size, res.Path)
	if res.Previous != "" {
		fmt.Fprintf(stdout, "the database it replaces is kept as %s\n", res.Previous)
	}
	fmt.Fprintf(stdout, "uploaded files are not in a backup: put the backed-up files folder at %s if needed\n", filepath.Join(dir, "files"))
	return nil
}
