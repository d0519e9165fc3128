package e2e

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestMain says, once, that the console's browser test is about to be
// skipped for want of a Chromium: `go test` reports a skipped test only
// with -v, and a newcomer without a browser should know what did not run.
func TestMain(m *testing.M) {
	flag.Parse()
	if findChromium() == "" && os.Getenv("BLUELINE_BROWSER_TESTS") != "require" && runs("TestConsoleInABrowser") {
		say("e2e: no chromium on PATH, so TestConsoleInABrowser (the console in a real browser) is skipped; apt-get install chromium to run it")
	}
	os.Exit(m.Run())
}

// runs reports whether -run selects the top-level test name.
func runs(name string) bool {
	pattern, _, _ := strings.Cut(flag.Lookup("test.run").Value.String(), "/")
	re, err := regexp.Compile(pattern)
	return err != nil || re.MatchString(name)
}

// say prints a line where a person sees it. Without -v, `go test ./...`
// prints nothing a passing package wrote, stderr included, so the line goes
// to the terminal itself when there is one; otherwise (-v, or CI with no
// terminal) to stderr, which go test shows with -v or when the package fails.
func say(line string) {
	w := io.Writer(os.Stderr)
	if !testing.Verbose() {
		if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
			defer tty.Close()
			w = tty
		}
	}
	fmt.Fprintln(w, line)
}
