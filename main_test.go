package main

import (
	"bytes"
	"strings"
	"testing"
)

// The binary's version variables reach the command line: what -ldflags
// stamps is what `blueline version` prints.
func TestRunVersion(t *testing.T) {
	version, commit = "1.2.3-test", "abc1234"
	t.Cleanup(func() { version, commit = "dev", "unknown" })
	var stdout, stderr bytes.Buffer
	if code := run([]string{"version"}, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if out := stdout.String(); !strings.Contains(out, "1.2.3-test") || !strings.Contains(out, "abc1234") {
		t.Errorf("version printed %q", out)
	}
}

// A command that does not exist is a usage error: exit code 2, and a word
// on stderr, nothing on stdout.
func TestRunUnknownCommand(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"no-such-command"}, strings.NewReader(""), &stdout, &stderr)
	if code != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "no-such-command") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
