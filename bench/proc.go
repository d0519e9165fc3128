package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Process figures come from /proc, so they exist on Linux only; elsewhere
// they are reported as unknown (-1) rather than measured some other way.

// rss is a process's resident memory: VmRSS, and the part of it that is
// anonymous (the Go heap and stacks). The rest is mostly file pages of the
// database's mmap, which the kernel can drop under memory pressure.
type rss struct{ total, anon int64 }

// rssOf reads a process's resident memory; unknown figures are -1.
func rssOf(pid int) rss {
	r := rss{-1, -1}
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return r
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, rest, ok := strings.Cut(s.Text(), ":")
		if !ok || (name != "VmRSS" && name != "RssAnon") {
			continue
		}
		fields := strings.Fields(rest) // "123456 kB"
		if len(fields) != 2 || fields[1] != "kB" {
			continue
		}
		kb, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			continue
		}
		if name == "VmRSS" {
			r.total = kb * 1024
		} else {
			r.anon = kb * 1024
		}
	}
	return r
}

func (r rss) String() string {
	if r.total < 0 {
		return "unknown"
	}
	if r.anon < 0 {
		return sizeStr(r.total)
	}
	return fmt.Sprintf("%s (anon %s, file-backed %s)", sizeStr(r.total), sizeStr(r.anon), sizeStr(r.total-r.anon))
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's CPU times. It is 100
// on every Linux architecture Go supports; reading it properly needs
// sysconf, which needs cgo.
const clockTicks = 100

// procCPU returns the user+system CPU seconds a process has used: pid 0 is
// this process, a negative pid none (-1 is returned, as on any failure).
func procCPU(pid int) float64 {
	if pid < 0 {
		return -1
	}
	name := "self"
	if pid > 0 {
		name = strconv.Itoa(pid)
	}
	data, err := os.ReadFile("/proc/" + name + "/stat")
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces; the fields after its
	// closing parenthesis start with field 3, the state.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64) // field 14
	stime, err2 := strconv.ParseInt(f[12], 10, 64) // field 15
	if err1 != nil || err2 != nil {
		return -1
	}
	return float64(utime+stime) / clockTicks
}

// machineCPU returns the CPU seconds all processors have spent busy and
// stolen by the hypervisor since boot (from /proc/stat), or -1s. Busy time
// beyond the daemon's and the bench's shows other work sharing the machine.
func machineCPU() (busy, steal float64) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return -1, -1
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return -1, -1
	}
	var v [8]int64
	for i := range v {
		n, err := strconv.ParseInt(f[i+1], 10, 64)
		if err != nil {
			return -1, -1
		}
		v[i] = n
	}
	busyTicks := v[0] + v[1] + v[2] + v[5] + v[6] // user nice system irq softirq
	return float64(busyTicks) / clockTicks, float64(v[7]) / clockTicks
}

// procWriteBytes returns the bytes a process has caused to be written to
// storage (write_bytes in /proc/PID/io), or -1.
func procWriteBytes(pid int) int64 {
	if pid < 0 {
		return -1
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "write_bytes:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}

// fileSize returns a file's size, or -1.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return -1
	}
	return fi.Size()
}

func mib(b int64) float64 {
	if b < 0 {
		return -1
	}
	return float64(b) / (1 << 20)
}
