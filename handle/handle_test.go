package handle_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/blueline-app/blueline/handle"
)

func TestNormalize(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"+15550102000", "+15550102000"},
		{" +1 (555) 010-2000", "+15550102000"},
		{"+44.20.7946.0000", "+442079460000"},
		{"+6834002", "+6834002"}, // Niue: 7 digits with the country code
		{"55555", "55555"},       // a short code
		{"Jane.Doe@Example.com", "jane.doe@example.com"},
		{"o'neil+tag@mail.example.co.uk", "o'neil+tag@mail.example.co.uk"},
	} {
		got, err := handle.Normalize(c.in)
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	bad := []string{"", "  ", "12", "+1234567890123456", "555-CALL-NOW", "1+555", "a@b", "@example.com", "a@@b.com", "a b@c.com", "a@b.com.", "cht_abc"}
	for _, in := range bad {
		if got, err := handle.Normalize(in); !errors.Is(err, handle.ErrInvalid) {
			t.Errorf("Normalize(%q) = %q, %v; want ErrInvalid", in, got, err)
		}
	}
}

// A domain is checked and converted with IDNA: its Unicode and xn-- forms,
// in any case or width, are one handle, in Unicode form.
func TestNormalizeIDNA(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"anna@bücher.de", "anna@bücher.de"},
		{"Anna@BÜCHER.DE", "anna@bücher.de"},
		{"anna@xn--bcher-kva.de", "anna@bücher.de"},
		{"anna@ｂüｃｈｅｒ.de", "anna@bücher.de"}, // full-width letters map to ASCII, as a resolver maps them
		{"taro@例え.jp", "taro@例え.jp"},
		{"taro@ひらがなカタカナ漢字.jp", "taro@ひらがなカタカナ漢字.jp"}, // Japanese: one writing system
		{"nikos@παράδειγμα.ελ", "nikos@παράδειγμα.ελ"},
	} {
		got, err := handle.Normalize(c.in)
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
}

// Each class of text that is not a handle, or would look like another, is
// refused, saying why.
func TestNormalizeRefuses(t *testing.T) {
	for _, c := range []struct{ name, in, why string }{
		{"invalid UTF-8", "jane\xff@example.com", "not valid UTF-8"},
		{"invalid UTF-8 in a number", "+1555\xc30102000", "not valid UTF-8"},
		{"C0 control", "jane\x1b[2J@example.com", "U+001B, a control character"},
		{"bare CR", "+1555\r0102000", "U+000D, a control character"},
		{"C1 control", "jane\u0085@example.com", "U+0085, a control character"},
		{"C1 control at the end", "+15550102000\u0085", "U+0085, a control character"},
		{"DEL", "jane\x7f@example.com", "U+007F, a control character"},
		{"bidi override", "jane\u202e@example.com", "U+202E, a bidirectional control"},
		{"bidi isolate", "+1555\u20660102000", "U+2066, a bidirectional control"},
		{"right-to-left mark", "jane@exa\u200fmple.com", "U+200F, a bidirectional control"},
		{"zero-width space", "ja\u200bne@example.com", "U+200B, an invisible character"},
		{"zero-width space in a number", "+1555\u200b0102000", "U+200B, an invisible character"},
		{"zero-width joiner in a domain", "jane@exa\u200dmple.com", "U+200D, an invisible character"},
		{"soft hyphen", "jane@exam\u00adple.com", "U+00AD, an invisible character"},
		{"byte order mark", "\ufeff+15550102000", "U+FEFF, an invisible character"},
		{"combining grapheme joiner", "jane@exa\u034fmple.com", "U+034F, an invisible character"},
		{"Hangul filler", "jane@exa\u3164mple.com", "U+3164, an invisible character"},
		{"variation selector", "jane@exa\ufe0fmple.com", "U+FE0F, an invisible character"},
		{"tag character", "jane@example.com\U000e0041", "U+E0041, an invisible character"},
		{"line separator", "jane\u2028@example.com", "U+2028, a line separator"},
		{"Arabic-Indic digits", "+١٥٥٥٠١٠٢٠٠٠", "U+0661, a digit other than 0 to 9"},
		{"full-width digits", "+１5550102000", "U+FF11, a digit other than 0 to 9"},
		{"no-break space in a number", "+1\u00a0555 010 2000", "not part of a phone number"},
		{"national number", "5550102000", "needs its country code after a +"},
		{"E.164 too short", "+123456", "7 to 15 digits"},
		{"E.164 too long", "+1234567890123456", "7 to 15 digits"},
		{"country code 0", "+0123456789", "does not start with 0"},
		{"short code too short", "12", "3 to 8 digits"},
		{"non-ASCII local part", "jаne@example.com", "U+0430"}, // Cyrillic а
		{"quoted local part", `"jane doe"@example.com`, `contains '"'`},
		{"dot at the start", ".jane@example.com", "dot at its start"},
		{"two dots", "jane..doe@example.com", "next to another"},
		{"local part too long", strings.Repeat("a", 65) + "@example.com", "longer than 64"},
		{"mixed-script domain", "jane@pаypal.com", `label "pаypal" mixes scripts`},
		{"mixed-script xn-- label", "jane@xn--pypal-4ve.com", "mixes scripts"},
		{"Greek in a Latin label", "jane@gοogle.com", "mixes scripts"}, // Greek ο
		{"domain IDNA refuses", "jane@exa_mple.com", "not a valid internationalised domain name"},
		{"hyphen at a label's start", "jane@-example.com", "not a valid internationalised domain name"},
		{"invalid xn-- label", "jane@xn--a.com", "not a valid internationalised domain name"},
		{"one label", "jane@localhost", "at least two labels"},
		{"trailing dot", "jane@example.com.", "dot at its start, its end"},
		{"IP address", "jane@192.168.0.1", "an address, not a name"},
		{"two @", "a@@b.com", "one @"},
		{"too long", strings.Repeat("a", 60) + "@" + strings.Repeat("b", 200) + ".com", "longer than 254 bytes"},
	} {
		got, err := handle.Normalize(c.in)
		if !errors.Is(err, handle.ErrInvalid) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: Normalize(%q) = %q, %v; want ErrInvalid saying %q", c.name, c.in, got, err, c.why)
		}
		var he *handle.Error
		if !errors.As(err, &he) || he.Reason == "" {
			t.Errorf("%s: %v is not a *handle.Error with a reason", c.name, err)
		}
	}
}

func TestIsPhone(t *testing.T) {
	if !handle.IsPhone("+15550102000") || handle.IsPhone("a@b.com") || handle.IsPhone("") {
		t.Fatal("IsPhone misclassifies")
	}
}

func TestIsShortCode(t *testing.T) {
	for h, want := range map[string]bool{"55555": true, "5551234": true, "+15550102000": false, "jane@example.com": false, "": false} {
		if got := handle.IsShortCode(h); got != want {
			t.Errorf("IsShortCode(%q) = %v, want %v", h, got, want)
		}
	}
	if err := handle.NotAShortCode("5551234", "+15550000001"); !errors.Is(err, handle.ErrInvalid) || !strings.Contains(err.Error(), "short code 5551234, which has not written to line +15550000001") {
		t.Errorf("NotAShortCode: %v", err)
	}
}
