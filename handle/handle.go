// Package handle normalises the addresses of the messaging network: phone
// numbers and account-ID (e-mail style) handles. Every comparison of handles
// in Blueline goes through Normalize so that "+1 (555) 010-2000" and
// "+15550102000" name the same contact.
package handle

import (
	"errors"
	"strings"
)

// ErrInvalid is returned for text that is neither a phone number nor an
// account-ID handle.
var ErrInvalid = errors.New("not a phone number or account-ID handle")

// Normalize returns the canonical form of a handle: phone numbers lose their
// punctuation and keep a leading +, account IDs are lower-cased.
func Normalize(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 254 {
		return "", ErrInvalid
	}
	if strings.Contains(s, "@") {
		return normalizeAccount(s)
	}
	return normalizePhone(s)
}

// IsPhone reports whether a normalised handle is a phone number.
func IsPhone(h string) bool {
	return h != "" && !strings.Contains(h, "@")
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
		default:
			return "", ErrInvalid
		}
	}
	out := b.String()
	digits := len(strings.TrimPrefix(out, "+"))
	// Short codes have 3–8 digits, E.164 numbers at most 15.
	if digits < 3 || digits > 15 {
		return "", ErrInvalid
	}
	return out, nil
}

func normalizeAccount(s string) (string, error) {
	local, domain, ok := strings.Cut(s, "@")
	if !ok || local == "" || domain == "" || strings.Contains(domain, "@") {
		return "", ErrInvalid
	}
	if !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") {
		return "", ErrInvalid
	}
	for _, r := range s {
		if r <= ' ' || r == 0x7f || r == ',' || r == ';' || r == '<' || r == '>' || r == '"' {
			return "", ErrInvalid
		}
	}
	return strings.ToLower(s), nil
}
