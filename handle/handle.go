// Package handle normalises the addresses of the messaging network: phone
// numbers and e-mail (account-ID) handles. Every comparison of handles in
// Blueline goes through Normalize so that "+1 (555) 010-2000" and
// "+15550102000" name the same contact.
//
// A handle is shown to people (in chats, the console, the CLI) and sent to
// Apple, so Normalize also refuses what would make two handles look alike
// or make one look like something else: invisible and bidi control
// characters, control characters, invalid UTF-8, non-ASCII digits, and
// domains that IDNA refuses or that mix scripts.
package handle

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/idna"
)

// ErrInvalid is matched (errors.Is) by every error Normalize returns.
var ErrInvalid = errors.New("not a phone number or e-mail handle")

// Forms names the forms a handle takes, for messages that refuse one.
const Forms = "a phone number in E.164 form (+ then the country code and number, such as +15550102000), " +
	"a short code of 3 to 8 digits, or an e-mail address (name@example.com)"

// Error is why a text is not a handle.
type Error struct {
	Reason string
}

func (e *Error) Error() string        { return ErrInvalid.Error() + ": " + e.Reason }
func (e *Error) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &Error{Reason: fmt.Sprintf(format, args...)}
}

// Normalize returns the canonical form of a handle: phone numbers lose their
// punctuation and keep a leading +; e-mail handles are lower-cased, their
// domain in Unicode form (an xn-- label is decoded).
func Normalize(s string) (string, error) {
	// Only ASCII space is trimmed: strings.TrimSpace would also drop a C1
	// control (U+0085) or a no-break space without a word.
	s = strings.Trim(s, " \t\r\n")
	switch {
	case s == "":
		return "", invalid("it is empty")
	case len(s) > 254:
		return "", invalid("it is longer than 254 bytes")
	case !utf8.ValidString(s):
		return "", invalid("it is not valid UTF-8")
	}
	for _, r := range s {
		if why := hidden(r); why != "" {
			return "", invalid("it contains %U, %s", r, why)
		}
	}
	if strings.Contains(s, "@") {
		return normalizeEmail(s)
	}
	return normalizePhone(s)
}

// hidden says why r cannot be in a handle wherever it stands: it is not
// seen, or it changes how what follows is seen; "" if neither.
func hidden(r rune) string {
	switch {
	case unicode.IsControl(r):
		return "a control character"
	case r >= 0x202A && r <= 0x202E, r >= 0x2066 && r <= 0x2069, r == 0x200E, r == 0x200F, r == 0x061C:
		return "a bidirectional control (it can reorder what is shown)"
	// Format characters (zero-width spaces and joiners, the BOM, the soft
	// hyphen, tags…) and the other default-ignorable code points are drawn
	// as nothing: "a\u200bb@example.com" would look like ab@example.com.
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r), unicode.Is(unicode.Variation_Selector, r):
		return "an invisible character"
	case r == 0x2028 || r == 0x2029:
		return "a line separator"
	}
	return ""
}

// IsPhone reports whether a normalised handle is a phone number.
func IsPhone(h string) bool {
	return h != "" && !strings.Contains(h, "@")
}

// IsShortCode reports whether a normalised handle is a short code: digits
// without a +.
func IsShortCode(h string) bool {
	return IsPhone(h) && !strings.HasPrefix(h, "+")
}

// NotAShortCode is why a short code that has never written to a line
// cannot name a contact of it. Services text from short codes, so a line
// may answer one that wrote first; one that did not is, in practice, a
// phone number written without its country code ("555-1234"), refused as
// such rather than later by the contact-first rule.
func NotAShortCode(h, line string) error {
	return invalid("without a + it could only be the short code %s, which has not written to line %s: a phone number needs a + and its country code", h, line)
}

func normalizePhone(s string) (string, error) {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '+' && i == 0:
			b.WriteRune(r)
		case r == ' ' || r == '-' || r == '(' || r == ')' || r == '.':
			// Formatting people type; not part of the number.
		case unicode.IsDigit(r):
			// ٥ or ５ would be a 5 to the eye but not to the network.
			return "", invalid("it contains %U, a digit other than 0 to 9", r)
		default:
			return "", invalid("%q is not part of a phone number, and there is no @ for an e-mail address", r)
		}
	}
	out := b.String()
	digits, plus := strings.CutPrefix(out, "+")
	switch {
	case plus && (len(digits) < 7 || len(digits) > 15):
		// E.164 numbers have at most 15 digits; the shortest in use (Niue,
		// Tokelau) have 7 with their country code.
		return "", invalid("an E.164 number has 7 to 15 digits after the +, not %d", len(digits))
	case plus && digits[0] == '0':
		return "", invalid("a country code does not start with 0")
	case !plus && len(digits) > 8:
		return "", invalid("a phone number needs its country code after a + (%d digits without a + is neither E.164 nor a short code)", len(digits))
	case !plus && len(digits) < 3:
		return "", invalid("a short code has 3 to 8 digits, not %d", len(digits))
	}
	return out, nil
}

// atext is what an unquoted local part may hold besides letters and digits
// (RFC 5322's atext).
const atext = "!#$%&'*+-/=?^_`{|}~"

func normalizeEmail(s string) (string, error) {
	local, domain, _ := strings.Cut(s, "@")
	switch {
	case local == "":
		return "", invalid("an e-mail address has a name before the @")
	case domain == "":
		return "", invalid("an e-mail address has a domain after the @")
	case strings.Contains(domain, "@"):
		return "", invalid("an e-mail address has one @")
	case len(local) > 64:
		return "", invalid("the name before the @ is longer than 64 characters")
	}
	// Apple IDs are plain ASCII before the @: anything else there could
	// only be a lookalike of one.
	for _, r := range local {
		if r > unicode.MaxASCII {
			return "", invalid("the name before the @ contains %U: it may only hold ASCII letters, digits, dots and %s", r, atext)
		}
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || strings.ContainsRune(atext, r)) {
			return "", invalid("the name before the @ contains %q: it may only hold letters, digits, dots and %s", r, atext)
		}
	}
	if strings.HasPrefix(local, ".") || strings.HasSuffix(local, ".") || strings.Contains(local, "..") {
		return "", invalid("the name before the @ has a dot at its start, its end or next to another")
	}
	d, err := normalizeDomain(domain)
	if err != nil {
		return "", err
	}
	return strings.ToLower(local) + "@" + d, nil
}

// normalizeDomain checks an e-mail address's domain with IDNA (UTS #46):
// Lookup maps it as a resolver would (case, width, NFC) and Registration
// then holds the result to the rules for registering a name (no
// disallowed or ignored code points, DNS lengths, and its xn-- labels
// decoded and checked too). It returns the domain in Unicode form.
func normalizeDomain(domain string) (string, error) {
	ascii, err := idna.Lookup.ToASCII(domain)
	if err == nil {
		_, err = idna.Registration.ToASCII(ascii)
	}
	if err != nil {
		return "", invalid("the domain %q is not a valid internationalised domain name (%v)", domain, err)
	}
	labels := strings.Split(ascii, ".")
	switch {
	case slices.Contains(labels, ""):
		return "", invalid("the domain %q has a dot at its start, its end or next to another", domain)
	case len(labels) < 2:
		return "", invalid("the domain %q needs at least two labels, such as example.com", domain)
	}
	if strings.Trim(labels[len(labels)-1], "0123456789") == "" {
		return "", invalid("the domain %q is an address, not a name", domain)
	}
	uni, err := idna.Lookup.ToUnicode(ascii)
	if err != nil {
		return "", invalid("the domain %q is not a valid internationalised domain name (%v)", domain, err)
	}
	for label := range strings.SplitSeq(uni, ".") {
		if scripts := scriptsOf(label); !oneScript(scripts) {
			return "", invalid("the domain's label %q mixes scripts (%s), as lookalikes of other names do", label, strings.Join(scripts, ", "))
		}
	}
	return uni, nil
}

// scriptsOf is the scripts of s's letters, in order of appearance; digits,
// hyphens and combining marks belong to every script (Common, Inherited).
func scriptsOf(s string) []string {
	var out []string
	for _, r := range s {
		if unicode.In(r, unicode.Common, unicode.Inherited) {
			continue
		}
		for name, table := range unicode.Scripts {
			if unicode.Is(table, r) {
				if !slices.Contains(out, name) {
					out = append(out, name)
				}
				break
			}
		}
	}
	return out
}

// cjk are the mixes of scripts that are one writing system (UTS #39's
// "highly restrictive" level): Japanese, Chinese with Bopomofo, Korean,
// each with Latin.
var cjk = [][]string{
	{"Latin", "Han", "Hiragana", "Katakana"},
	{"Latin", "Han", "Bopomofo"},
	{"Latin", "Han", "Hangul"},
}

// oneScript reports whether scripts are one script, or one of the mixes
// in cjk: "pаypal" with a Cyrillic а is not.
func oneScript(scripts []string) bool {
	if len(scripts) <= 1 {
		return true
	}
	for _, allowed := range cjk {
		all := true
		for _, s := range scripts {
			all = all && slices.Contains(allowed, s)
		}
		if all {
			return true
		}
	}
	return false
}
