package messages

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"slices"
	"strconv"
)

// messagesExecutables are where the Messages app's program is: since
// macOS 10.15, and before it.
var messagesExecutables = []string{
	"/System/Applications/Messages.app/Contents/MacOS/Messages",
	"/Applications/Messages.app/Contents/MacOS/Messages",
}

// messagesPeer is the Mac's PeerChecker: the connection must come from the
// Messages app (the helper lives inside it) run by the daemon's user. It
// asks lsof, which reads the kernel's tables, which process holds the other
// end of the TCP connection and which program that process runs.
//
// Only processes of the daemon's own user can pass, and lsof run by an
// ordinary user sees no one else's: a connection from another user is
// refused for certain. A process of the same user could already reach
// everything the daemon has (its data folder, its admin socket); the
// program check keeps out the ordinary ones, not a determined impostor.
type messagesPeer struct {
	uid int
	// lsof runs lsof with args and returns its output; lsof exits 1 when it
	// finds nothing, which is output nil, not an error.
	lsof func(ctx context.Context, args ...string) ([]byte, error)
}

// runLsof runs the system's lsof (by its absolute path: not one found in
// $PATH).
func runLsof(ctx context.Context, args ...string) ([]byte, error) {
	out, err := exec.CommandContext(ctx, "/usr/sbin/lsof", args...).Output()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) && exitErr.ExitCode() == 1 && len(out) == 0 {
		return nil, nil
	}
	return out, err
}

func (p messagesPeer) CheckPeer(ctx context.Context, conn net.Conn) error {
	local, ok1 := conn.LocalAddr().(*net.TCPAddr)
	remote, ok2 := conn.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return fmt.Errorf("not a TCP connection: %s", conn.RemoteAddr())
	}
	// The peer's end: its local address is our remote one, and the other
	// way round. lsof lists both ends of a loopback connection for -i.
	out, err := p.lsof(ctx, "-nP", "-w", "-iTCP@"+remote.IP.String()+":"+strconv.Itoa(remote.Port), "-Fpun")
	if err != nil {
		return fmt.Errorf("find the process that connected: lsof: %w", err)
	}
	peerEnd := remote.String() + "->" + local.String()
	var holders []lsofProcess
	for _, proc := range parseLsof(out) {
		if slices.Contains(proc.Names, peerEnd) {
			holders = append(holders, proc)
		}
	}
	if len(holders) == 0 {
		return fmt.Errorf("no process of uid %d holds the other end (%s)", p.uid, remote)
	}
	for _, proc := range holders {
		if proc.UID != p.uid {
			return fmt.Errorf("process %d holding the other end runs as uid %d, not as uid %d that runs the daemon", proc.PID, proc.UID, p.uid)
		}
		// The program: the first text file lsof lists for the process.
		out, err := p.lsof(ctx, "-nP", "-w", "-a", "-p", strconv.Itoa(proc.PID), "-d", "txt", "-Fn")
		if err != nil {
			return fmt.Errorf("find the program of process %d: lsof: %w", proc.PID, err)
		}
		var program string
		if procs := parseLsof(out); len(procs) == 1 && procs[0].PID == proc.PID && len(procs[0].Names) > 0 {
			program = procs[0].Names[0]
		}
		if !slices.Contains(messagesExecutables, program) {
			return fmt.Errorf("process %d (%q) is not Messages", proc.PID, program)
		}
	}
	return nil
}

// lsofProcess is one process of lsof's field output (-F): its PID, user ID
// and the names of the files it lists.
type lsofProcess struct {
	PID   int
	UID   int
	Names []string
}

// parseLsof reads lsof's field output: a line per field, its first
// character saying which ("p" starts a process, "u" its uid, "f" a file,
// "n" a file's name). Other fields are skipped.
func parseLsof(out []byte) []lsofProcess {
	var procs []lsofProcess
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		value := line[1:]
		switch line[0] {
		case 'p':
			pid, err := strconv.Atoi(value)
			if err != nil {
				pid = -1
			}
			procs = append(procs, lsofProcess{PID: pid, UID: -1})
		case 'u':
			if len(procs) > 0 {
				if uid, err := strconv.Atoi(value); err == nil {
					procs[len(procs)-1].UID = uid
				}
			}
		case 'n':
			if len(procs) > 0 {
				procs[len(procs)-1].Names = append(procs[len(procs)-1].Names, value)
			}
		}
	}
	return procs
}
