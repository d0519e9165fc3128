package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"github.com/pelletier/go-toml/v2/unstable"
)

// fileError is one problem in a configuration document, rendered as
// "config FILE[:LINE]: [KEY: ]problem" so that it can be acted on without
// reading the code.
type fileError struct {
	file string
	line int    // 0 when the problem is not tied to one place (checks after decoding)
	key  string // dotted path such as "lines[1].service"; "" when msg names it
	msg  string // replaces err's text when the library's wording would confuse
	err  error
}

func (e *fileError) Error() string {
	var b strings.Builder
	b.WriteString("config ")
	b.WriteString(e.file)
	if e.line > 0 {
		b.WriteString(":")
		b.WriteString(strconv.Itoa(e.line))
	}
	b.WriteString(": ")
	if e.key != "" {
		b.WriteString(e.key)
		b.WriteString(": ")
	}
	if e.msg != "" {
		b.WriteString(e.msg)
	} else {
		b.WriteString(e.err.Error())
	}
	return b.String()
}

// Unwrap keeps errors.Is(err, fs.ErrNotExist) and errors.As on the
// underlying go-toml or handle errors working.
func (e *fileError) Unwrap() error { return e.err }

// decodeError turns a go-toml error into fileErrors that carry the line.
func decodeError(name string, data []byte, err error) error {
	// Checked before DecodeError: errors.As would otherwise pick the first
	// unknown key out of the StrictMissingError and drop the rest.
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		errs := make([]error, 0, len(strict.Errors))
		for i := range strict.Errors {
			de := &strict.Errors[i]
			line, _ := de.Position()
			errs = append(errs, &fileError{
				file: name,
				line: line,
				msg:  fmt.Sprintf("unknown key %q", strings.Join(de.Key(), ".")),
				err:  de,
			})
		}
		return errors.Join(errs...)
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, _ := de.Position()
		return &fileError{
			file: name,
			line: line,
			key:  indexedKey(data, line, de.Key()),
			msg:  decodeMessage(de),
			err:  de,
		}
	}
	// go-toml passes errors from a TextUnmarshaler fed a bare number
	// through without a position: find the number in the document.
	if _, ok := errors.AsType[*durationError](err); ok {
		if key, line := bareDuration(data); line > 0 {
			return &fileError{file: name, line: line, key: key, err: err}
		}
	}
	return &fileError{file: name, err: err}
}

// bareDuration finds the first duration setting of a document written as a
// bare number (poll = 5) rather than a duration string, and says where it
// is: its key, such as "lines[1].poll" or "webhooks.retry_schedule[2]",
// and its line. line is 0 when there is none.
func bareDuration(data []byte) (key string, line int) {
	var p unstable.Parser
	p.Reset(data)
	var table []string
	arrays := map[string]int{} // array table → index of its last element
	for p.NextExpression() {
		e := p.Expression()
		switch e.Kind {
		case unstable.Table, unstable.ArrayTable:
			table = table[:0]
			for it := e.Key(); it.Next(); {
				table = append(table, string(it.Node().Data))
			}
			if e.Kind == unstable.ArrayTable {
				arrays[strings.Join(table, ".")]++
			}
		case unstable.KeyValue:
			path := slices.Clone(table)
			for it := e.Key(); it.Next(); {
				path = append(path, string(it.Node().Data))
			}
			v := e.Value()
			var at *unstable.Node
			index := ""
			switch {
			case isNumber(v):
				at = v
			case v.Kind == unstable.Array:
				i := 0
				for it := v.Children(); it.Next(); i++ {
					if isNumber(it.Node()) {
						at, index = it.Node(), fmt.Sprintf("[%d]", i)
						break
					}
				}
			}
			if at == nil || !isDuration(path) {
				continue
			}
			return dottedKey(path, len(table), arrays) + index, p.Shape(at.Raw).Start.Line
		}
	}
	return "", 0
}

// indexedKey writes key, found at line, with the index of the array table
// element it is in ("lines[1].poll" where go-toml says "lines.poll").
func indexedKey(data []byte, line int, key []string) string {
	var p unstable.Parser
	p.Reset(data)
	var table []string
	arrays := map[string]int{}
	for p.NextExpression() {
		e := p.Expression()
		if e.Kind != unstable.Table && e.Kind != unstable.ArrayTable {
			continue
		}
		if p.Shape(e.Raw).Start.Line > line {
			break
		}
		table = table[:0]
		for it := e.Key(); it.Next(); {
			table = append(table, string(it.Node().Data))
		}
		if e.Kind == unstable.ArrayTable {
			arrays[strings.Join(table, ".")]++
		}
	}
	if len(table) > len(key) || !slices.Equal(table, key[:len(table)]) {
		return strings.Join(key, ".")
	}
	return dottedKey(key, len(table), arrays)
}

func isNumber(n *unstable.Node) bool {
	return n.Kind == unstable.Integer || n.Kind == unstable.Float
}

// isDuration reports whether the Config field at path is a Duration or a
// list of them.
func isDuration(path []string) bool {
	want := expected(path)
	return strings.HasPrefix(want, "a duration") || strings.HasPrefix(want, "an array of duration")
}

// dottedKey writes path as the checks after decoding do: an array table's
// element by its index ("lines[1].poll"). Its first tableLen parts are the
// current table's.
func dottedKey(path []string, tableLen int, arrays map[string]int) string {
	var b strings.Builder
	for i, part := range path {
		if i > 0 {
			b.WriteString(".")
		}
		b.WriteString(part)
		if i < tableLen {
			if n, ok := arrays[strings.Join(path[:i+1], ".")]; ok && i == tableLen-1 {
				fmt.Fprintf(&b, "[%d]", n-1)
			}
		}
	}
	return b.String()
}

// decodeMessage rewords go-toml's type mismatches, which name Go types
// ("struct field config.Limits.RequestsPerHour of type int"), in terms of
// the TOML the user should have written.
func decodeMessage(de *toml.DecodeError) string {
	msg := strings.TrimPrefix(de.Error(), "toml: ")
	rest, ok := strings.CutPrefix(msg, "cannot decode TOML ")
	if !ok {
		return msg
	}
	got, _, ok := strings.Cut(rest, " into ")
	want := expected(de.Key())
	if !ok || want == "" {
		return msg
	}
	return fmt.Sprintf("must be %s, got a TOML %s", want, got)
}

// expected describes the TOML value the Config field at key takes, or ""
// when key names no field.
func expected(key []string) string {
	t := reflect.TypeFor[Config]()
	for _, part := range key {
		if t.Kind() == reflect.Slice {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return ""
		}
		f, ok := fieldByTag(t, part)
		if !ok {
			return ""
		}
		t = f.Type
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == reflect.TypeFor[Duration]() {
		return `a duration string such as "5s"`
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.Struct:
		return "a table"
	case reflect.Slice:
		switch e := t.Elem(); {
		case e == reflect.TypeFor[Duration]():
			return `an array of duration strings such as ["5s"]`
		case e.Kind() == reflect.String:
			return "an array of strings"
		}
		return "an array of tables"
	default:
		return ""
	}
}

// fieldByTag finds the field go-toml would decode name into; go-toml falls
// back to case-insensitive matching, so this does too.
func fieldByTag(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if strings.EqualFold(tag, name) {
			return f, true
		}
	}
	return reflect.StructField{}, false
}
