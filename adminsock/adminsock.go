// Package adminsock is the admin socket's transport: where it is, and the
// checks each end makes of the other before trusting it (the folder it is
// in, the process at the other end). The daemon listens on it; the command
// line dials it (adminsock.Client).
package adminsock

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The admin socket is how the CLI reaches the running daemon: bbolt locks
// the database file, so no command may open it behind the daemon. It is a
// Unix socket with mode 0600, with no network exposure, and each end checks
// the other before trusting it:
//
//   - The daemon listens only in a folder that is its own. That is the data
//     folder (which must belong to the daemon's user and not be writable by
//     its group or others) or, when the data folder's path is too long for a
//     socket, a folder it creates itself under the temporary directory,
//     named after the data folder so that the CLI finds the same one. That
//     folder must be a real folder (not a symbolic link) of the daemon's
//     user with mode 0700. Anyone can make a folder of that name first; the
//     daemon leaves such a folder alone and, rather than not start (which
//     would let any local user stop the service), listens in a folder of a
//     random name that it makes, and writes where in the data folder
//     (movedSocketNote) for the CLI. Under systemd's PrivateTmp the
//     temporary directory is invisible to the CLI, so there the daemon
//     refuses to move the socket at all.
//   - The CLI sends nothing before it has checked that the socket and its
//     folder belong to a user it trusts (see trustedUIDs) and are not
//     writable by others, then, after connecting, that the process
//     answering runs as such a user (SO_PEERCRED on Linux, LOCAL_PEERCRED
//     on macOS).

// maxSocketPath keeps under macOS's 104-byte sun_path (Linux allows 108).
const maxSocketPath = 100

// ErrUntrusted is the CLI refusing an admin socket that may not be
// the daemon's: nothing was sent to it.
var ErrUntrusted = errors.New("refusing the admin socket")

// Path is where the daemon with data folder dir listens. When the
// folder's path is too long for a socket, it moves to a private folder under
// the system's temporary directory, named after the data folder so that the
// CLI finds the same one (or, when a folder of that name was there before
// and is not the daemon's, the folder the data folder's movedSocketNote
// names).
func Path(dir string) string {
	path, _ := adminSocket(dir)
	return path
}

// adminSocket is Path, and whether it is in a folder under the
// temporary directory rather than the data folder.
func adminSocket(dir string) (path string, fallback bool) {
	p := filepath.Join(dir, "admin.sock")
	if len(p) <= maxSocketPath {
		return p, false
	}
	if moved, ok := movedSocket(dir); ok {
		return moved, true
	}
	return filepath.Join(socketFolderOf(dir), "admin.sock"), true
}

// socketFolderOf is the folder under the temporary directory named after
// the data folder dir.
func socketFolderOf(dir string) string {
	sum := sha256.Sum256([]byte(dir))
	return filepath.Join(os.TempDir(), "blueline-"+hex.EncodeToString(sum[:8]))
}

// movedSocketNote, in the data folder, holds the path of the admin socket
// while it is in a folder of a random name, away from a folder of its usual
// name that is not the daemon's.
const movedSocketNote = "admin.sock.path"

// movedSocket is the path movedSocketNote holds, if it holds one where the
// daemon would have moved the socket: admin.sock in a folder under the
// temporary directory whose name starts with the usual folder's. The CLI
// then checks that folder as it checks the usual one.
func movedSocket(dir string) (string, bool) {
	data, err := os.ReadFile(filepath.Join(dir, movedSocketNote))
	if err != nil || len(data) > 4096 {
		return "", false
	}
	p := strings.TrimSpace(string(data))
	usual := socketFolderOf(dir)
	folder := filepath.Dir(p)
	ok := filepath.IsAbs(p) && filepath.Clean(p) == p && filepath.Base(p) == "admin.sock" &&
		filepath.Dir(folder) == filepath.Dir(usual) && strings.HasPrefix(filepath.Base(folder), filepath.Base(usual)+"-") &&
		len(p) <= maxSocketPath
	return p, ok
}

// Listen opens the admin socket for the data folder dir, after checking
// that the folder it goes in is the daemon's own. A socket file left by a
// daemon that died is replaced; one a live daemon answers on is not. A
// moved socket (see the top of this file) is logged, as a warning, with
// where it is.
func Listen(dir string, log *slog.Logger) (net.Listener, error) {
	return listenAdmin(dir, tempDirIsPrivate, log)
}

// listenAdmin is Listen; private tells whether a folder is hidden from
// other processes (systemd's PrivateTmp).
func listenAdmin(dir string, private func(dir string) bool, log *slog.Logger) (net.Listener, error) {
	path := filepath.Join(dir, "admin.sock")
	if len(path) > maxSocketPath {
		folder, err := socketFolder(dir, private, log)
		if err != nil {
			return nil, err
		}
		path = filepath.Join(folder, "admin.sock")
	} else if err := checkDataFolder(dir); err != nil {
		return nil, err
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return nil, fmt.Errorf("another daemon is already serving %s", path)
	}
	os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return l, nil
}

// checkDataFolder checks the data folder before the admin socket goes in
// it: it must belong to the daemon's user, and nobody else may write in it
// (who could put a socket of their own in the daemon's place). Its owner may
// let its group read it (the .deb makes it 0750), and it may be a symbolic
// link: the folder it leads to is checked.
func checkDataFolder(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("admin socket: %w", err)
	}
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("refusing to start: the data folder %s, which holds the admin socket, %s", dir, fmt.Sprintf(format, args...))
	}
	euid := os.Geteuid()
	switch {
	case !fi.IsDir():
		return refuse("is not a folder")
	case fileOwner(fi) != euid:
		return refuse("belongs to %s, not to %s, who runs the daemon: run the daemon as its owner, or give it the folder (chown -R)",
			describeUID(fileOwner(fi)), describeUID(euid))
	case fi.Mode().Perm()&0o022 != 0:
		return refuse("is writable by its group or others (mode %04o), who could put a socket of their own in its place: chmod go-w %s",
			fi.Mode().Perm(), dir)
	}
	return nil
}

// socketFolder is the folder of the admin socket when the data folder's
// path is too long for it: the folder named after the data folder under the
// temporary directory, which the daemon creates, or takes from a previous
// run, once it has checked that it is its own. A folder of that name may
// have been made by anyone beforehand, to catch what the CLI sends or only
// to keep the daemon from starting: then the socket goes to a folder of a
// random name instead (the one a previous run made, if it is still the
// daemon's own), which movedSocketNote names for the CLI.
func socketFolder(dir string, private func(string) bool, log *slog.Logger) (string, error) {
	usual := socketFolderOf(dir)
	if tmp := filepath.Dir(usual); private(tmp) {
		return "", fmt.Errorf("refusing to start: the data folder's path %s is too long for a Unix socket (at most %d bytes with /admin.sock), "+
			"and %s, where the admin socket would go instead, is private to this service (systemd's PrivateTmp): the admin commands could not reach it. "+
			"Give the data folder a shorter path", dir, maxSocketPath, tmp)
	}
	note := filepath.Join(dir, movedSocketNote)
	err := os.Mkdir(usual, 0o700)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("admin socket folder: %w", err)
	}
	if err == nil {
		// Ours: set the mode whatever the umask left.
		if err := os.Chmod(usual, 0o700); err != nil {
			return "", fmt.Errorf("admin socket folder: %w", err)
		}
	}
	why, err := notOwnFolder(usual)
	if err != nil {
		return "", err
	}
	if why == "" {
		// The usual folder is ours: the CLI must look there, not where an
		// earlier run moved to.
		if err := os.Remove(note); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("admin socket: %w", err)
		}
		return usual, nil
	}
	folder := ""
	if p, ok := movedSocket(dir); ok {
		if w, err := notOwnFolder(filepath.Dir(p)); err == nil && w == "" {
			folder = filepath.Dir(p)
		}
	}
	if folder == "" {
		// MkdirTemp makes it with mode 0700 under a name nobody could
		// have taken beforehand.
		if folder, err = os.MkdirTemp(filepath.Dir(usual), filepath.Base(usual)+"-"); err != nil {
			return "", fmt.Errorf("admin socket folder: %w", err)
		}
		if err := os.Chmod(folder, 0o700); err != nil {
			return "", fmt.Errorf("admin socket folder: %w", err)
		}
		if err := writeNote(note, filepath.Join(folder, "admin.sock")); err != nil {
			return "", fmt.Errorf("admin socket: %w", err)
		}
	}
	log.Warn("the admin socket's usual folder is not the daemon's own, and may have been put there to intercept the admin commands: "+
		"the admin socket is elsewhere, where the command line finds it, until that folder is removed",
		"folder", usual, "problem", why, "admin_socket", filepath.Join(folder, "admin.sock"),
		"fix", "rm -r "+usual+" (as its owner or root), or give the data folder a shorter path")
	return folder, nil
}

// notOwnFolder says what makes folder other than a real folder of the
// daemon's user with mode 0700 ("" when it is one).
func notOwnFolder(folder string) (string, error) {
	fi, err := os.Lstat(folder)
	if err != nil {
		return "", fmt.Errorf("admin socket folder: %w", err)
	}
	euid := os.Geteuid()
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return "is a symbolic link", nil
	case !fi.IsDir():
		return "is not a folder", nil
	case fileOwner(fi) != euid:
		return fmt.Sprintf("belongs to %s, not to %s, who runs the daemon", describeUID(fileOwner(fi)), describeUID(euid)), nil
	case fi.Mode().Perm() != 0o700:
		return fmt.Sprintf("has mode %04o, not 0700", fi.Mode().Perm()), nil
	}
	return "", nil
}

// writeNote replaces the file at path with one holding text, so that a
// reader sees the old or the new one whole.
func writeNote(path, text string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(text+"\n"), 0o600); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// tempDirIsPrivate reports whether dir is on a mount systemd made private to
// this service, from /proc/self/mountinfo (false where there is none).
func tempDirIsPrivate(dir string) bool {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	defer f.Close()
	if resolved, err := filepath.EvalSymlinks(dir); err == nil {
		dir = resolved
	}
	return privateMount(f, dir)
}

// privateMount reports whether dir lies on a mount that systemd made private
// to a service: PrivateTmp=yes bind-mounts
// /tmp/systemd-private-<boot>-<unit>-<random>/tmp over /tmp (and likewise
// /var/tmp), and that source shows as the mount's root in mountinfo. Of the
// mounts that hold dir, the deepest, and of those the last listed (the one on
// top), is the one that counts.
func privateMount(mountinfo io.Reader, dir string) bool {
	best, private := -1, false
	sc := bufio.NewScanner(mountinfo)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		root, point := unescapeMount(f[3]), unescapeMount(f[4])
		if point != "/" && dir != point && !strings.HasPrefix(dir, point+"/") {
			continue
		}
		if len(point) >= best {
			best, private = len(point), strings.Contains(root, "/systemd-private-")
		}
	}
	return private
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// trustedUIDs are the users the CLI accepts as the daemon's, for the socket,
// its folder and the process answering: the CLI's own user and root; and,
// when the CLI runs as root (`sudo blueline keys create` with the daemon
// running as the `blueline` account), the owner of the data folder, provided
// that only root could have given it that owner: its parent folder belongs
// to root and is not writable by group or others (/var/lib/blueline, made by
// the .deb or `blueline install`). A data folder under /tmp or someone's home
// does not qualify: run the CLI as the daemon's user there.
func trustedUIDs(dataDir string) []int {
	uids := []int{os.Geteuid()}
	if uids[0] != 0 {
		return append(uids, 0)
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return uids
	}
	if resolved, err := filepath.EvalSymlinks(abs); err == nil {
		abs = resolved
	}
	fi, err := os.Stat(abs)
	if err != nil || !fi.IsDir() {
		return uids
	}
	parent, err := os.Stat(filepath.Dir(abs))
	if err != nil || fileOwner(parent) != 0 || parent.Mode().Perm()&0o022 != 0 {
		return uids
	}
	if owner := fileOwner(fi); owner != 0 {
		uids = append(uids, owner)
	}
	return uids
}

// checkAdminSocket checks, before the CLI connects, that the socket at path
// and its folder belong to a trusted user and that nobody else may write to
// them. What is missing or cannot be looked at is left to the connection,
// which then fails (the daemon is not running, or not for this user).
func checkAdminSocket(path string, fallback bool, trusted []int) error {
	folder := filepath.Dir(path)
	stat := os.Stat // the data folder may be a symbolic link
	if fallback {
		stat = os.Lstat
	}
	fi, err := stat(folder)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrUntrusted, path, err)
	}
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s; nothing was sent to it", ErrUntrusted, path, fmt.Sprintf(format, args...))
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return refuse("its folder %s is a symbolic link", folder)
	case !fi.IsDir():
		return refuse("%s is not a folder", folder)
	case !slices.Contains(trusted, fileOwner(fi)):
		return refuse("its folder %s belongs to %s, while the CLI trusts only %s as the daemon's user", folder, describeUID(fileOwner(fi)), describeUIDs(trusted))
	case fallback && fi.Mode().Perm()&0o077 != 0:
		return refuse("its folder %s has mode %04o, not 0700", folder, fi.Mode().Perm())
	case fi.Mode().Perm()&0o022 != 0:
		return refuse("its folder %s is writable by its group or others (mode %04o)", folder, fi.Mode().Perm())
	}
	fi, err = os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%w %s: %w", ErrUntrusted, path, err)
	}
	switch {
	case fi.Mode().Type() != fs.ModeSocket:
		return refuse("it is not a socket")
	case !slices.Contains(trusted, fileOwner(fi)):
		return refuse("it belongs to %s, while the CLI trusts only %s as the daemon's user", describeUID(fileOwner(fi)), describeUIDs(trusted))
	case fi.Mode().Perm()&0o022 != 0:
		return refuse("it is writable by its group or others (mode %04o)", fi.Mode().Perm())
	}
	return nil
}

// dialAdmin connects to the admin socket once it and the process answering
// on it are found to be the daemon's.
func dialAdmin(ctx context.Context, path string, fallback bool, trusted []int) (net.Conn, error) {
	if err := checkAdminSocket(path, fallback, trusted); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return nil, err
	}
	uid, err := peerUID(c)
	switch {
	case errors.Is(err, errNoPeerCredentials):
		// Only the socket file's owner was checked, above.
	case err != nil:
		c.Close()
		return nil, fmt.Errorf("%w %s: the credentials of the process answering: %w", ErrUntrusted, path, err)
	case !slices.Contains(trusted, uid):
		c.Close()
		return nil, fmt.Errorf("%w %s: the process answering on it runs as %s, while the CLI trusts only %s as the daemon's user; nothing was sent to it",
			ErrUntrusted, path, describeUID(uid), describeUIDs(trusted))
	}
	return c, nil
}

// errNoPeerCredentials is a system that does not tell who is at the other
// end of a Unix socket.
var errNoPeerCredentials = errors.New("peer credentials not available on this system")

// fileOwner is the uid that owns a file (-1 if the system does not say).
func fileOwner(fi fs.FileInfo) int {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int(st.Uid)
	}
	return -1
}

// describeUID names a uid for a message: "uid 999 (blueline)".
func describeUID(uid int) string {
	if u, err := user.LookupId(strconv.Itoa(uid)); err == nil {
		return fmt.Sprintf("uid %d (%s)", uid, u.Username)
	}
	return "uid " + strconv.Itoa(uid)
}

func describeUIDs(uids []int) string {
	names := make([]string, len(uids))
	for i, uid := range uids {
		names[i] = describeUID(uid)
	}
	return strings.Join(names, " or ")
}

// BaseURL is the base URL of requests over the admin socket: the socket is
// what they reach, whatever the host.
const BaseURL = "http://blueline"

// ErrDaemonNotRunning is returned when nothing answers on the admin socket.
var ErrDaemonNotRunning = errors.New("the daemon is not running")

// Dialer connects to the admin socket of the daemon with data folder dir,
// for an http.Transport's DialContext. It connects to no socket that may not
// be the daemon's (ErrUntrusted), and reports a socket nobody answers on as
// ErrDaemonNotRunning.
func Dialer(dir string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return dialer(dir, trustedUIDs)
}

// dialer is Dialer; trust names the users accepted as the daemon's.
func dialer(dir string, trust func(dataDir string) []int) func(ctx context.Context, network, addr string) (net.Conn, error) {
	socket, fallback := adminSocket(dir)
	return func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := dialAdmin(ctx, socket, fallback, trust(dir))
		if opErr, ok := errors.AsType[*net.OpError](err); ok && opErr.Op == "dial" {
			return nil, fmt.Errorf("%w (no answer on %s): start it with `blueline serve`", ErrDaemonNotRunning, socket)
		}
		return c, err
	}
}

// onUnixSocket runs f on the file descriptor of a Unix socket connection,
// for the system calls that read its peer's credentials.
func onUnixSocket(c net.Conn, f func(fd int) error) error {
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return fmt.Errorf("not a Unix socket connection: %T", c)
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) { ferr = f(int(fd)) }); err != nil {
		return err
	}
	return ferr
}
