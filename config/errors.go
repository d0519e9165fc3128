package config

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
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
func decodeError(name string, err error) error {
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
			key:  strings.Join(de.Key(), "."),
			msg:  decodeMessage(de),
			err:  de,
		}
	}
	// go-toml passes errors from a TextUnmarshaler fed an integer through
	// without a position; Duration's message names the value instead.
	return &fileError{file: name, err: err}
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
