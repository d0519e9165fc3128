// Command longused writes a long-used Mac's chat.db (chatdbtest.WriteLongUsed)
// of n rows in a folder: `go run ./e2e/testdata/longused DIR N`. The
// crash-during-import test builds it without the race detector, under which
// the pure-Go SQLite takes minutes to write what this writes in seconds.
package main

import (
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// tb is what chatdbtest asks of a test, for a program: a failure ends it.
type tb struct{ testing.TB }

func (tb) Helper() {}

func (tb) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "longused: "+format+"\n", args...)
	os.Exit(1)
}

func (tb) Fatal(args ...any) { tb{}.Fatalf("%s", fmt.Sprint(args...)) }

// Cleanup runs nothing: the program ends, and the database it wrote is
// what it is for.
func (tb) Cleanup(func()) {}

func (tb) TempDir() string {
	dir, err := os.MkdirTemp("", "longused")
	if err != nil {
		tb{}.Fatal(err)
	}
	return dir
}

func main() {
	if len(os.Args) != 3 {
		tb{}.Fatalf("usage: longused DIR ROWS")
	}
	n, err := strconv.Atoi(os.Args[2])
	if err != nil {
		tb{}.Fatal(err)
	}
	fx := chatdbtest.New(tb{}, os.Args[1])
	chatdbtest.WriteLongUsed(fx, n)
	fx.Checkpoint()
	fmt.Println(fx.Path())
}
