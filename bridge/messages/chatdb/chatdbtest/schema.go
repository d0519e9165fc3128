package chatdbtest

import (
	"database/sql/driver"
	_ "embed" // for Schema
	"fmt"
	"regexp"
	"strings"

	sqlite "modernc.org/sqlite"
)

// Schema is the full schema of a real chat.db written by Messages on
// macOS 26.0.1: every table, index and trigger, with the column names,
// types, defaults and constraints Messages creates (see
// schema_macos26.sql). It leaves out sqlite_sequence and sqlite_stat1,
// which SQLite makes itself.
//
//go:embed schema_macos26.sql
var Schema string

// appleFunctions are the SQL functions Apple's triggers call, with their
// argument counts. Messages registers them in its own process; SQLite
// accepts CREATE TRIGGER without them but fails a statement whose trigger
// calls one that is missing.
var appleFunctions = []struct {
	name  string
	nArgs int32
}{
	{"after_delete_message_plugin", 2},                 // after_delete_on_message_plugin
	{"before_delete_attachment_path", 2},               // before_delete_on_attachment
	{"delete_attachment_path", 1},                      // after_delete_on_attachment
	{"delete_chat_background_before_deleting_chat", 2}, // before_deleting_chat_delete_chat_background_trigger
	{"guid_for_chat", 3},                               // before_delete_chat_update_sync_chat_deletes
	{"is_mic_enabled", 0},                              // before_delete_chat_update_sync_chat_deletes (WHEN)
	{"verify_chat", 1},                                 // verify_chat_insert, verify_chat_update
}

// init registers no-op stand-ins for appleFunctions with the
// modernc.org/sqlite driver, so the fixture's writer connection can insert,
// update and delete with the real triggers in place. The driver applies
// them to every connection opened afterwards, and init runs (once) before
// any fixture opens one. Each returns NULL: the triggers ignore the result
// of the SELECTs that call them, and is_mic_enabled() = 1 is then false, so
// the chat sync bookkeeping that needs guid_for_chat never runs. The code
// under test reads through its own read-only connection, which fires no
// triggers and so never calls them.
func init() {
	noop := func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) { return nil, nil }
	for _, fn := range appleFunctions {
		if err := sqlite.RegisterScalarFunction(fn.name, fn.nArgs, noop); err != nil {
			panic("chatdbtest: register " + fn.name + ": " + err.Error())
		}
	}
}

// dropBlocker matches SQLite's refusal to drop a column that an index,
// trigger or view still uses, naming that object.
var dropBlocker = regexp.MustCompile(`error in (index|trigger|view) (\S+) after drop column`)

// dropColumn drops column from table. Apple's indexes and triggers use many
// columns, and SQLite refuses to drop a column one of them uses; a Mac
// whose schema lacks the column would not have them either, so each object
// SQLite names in a refusal is dropped before trying again.
func (f *Fixture) dropColumn(table, column string) {
	f.t.Helper()
	alter := fmt.Sprintf("ALTER TABLE %q DROP COLUMN %q", table, column)
	for {
		_, err := f.conn().Exec(alter)
		if err == nil {
			return
		}
		m := dropBlocker.FindStringSubmatch(err.Error())
		if m == nil {
			f.t.Fatalf("chatdbtest: exec %q: %v", alter, err)
		}
		f.Exec(fmt.Sprintf("DROP %s %q", strings.ToUpper(m[1]), m[2]))
	}
}
