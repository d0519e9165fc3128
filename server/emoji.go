package server

import (
	"strings"
	"unicode/utf8"
)

// isOneEmoji reports whether s is exactly one emoji: one grapheme cluster
// of one of the shapes Unicode's emoji sequences take (UTS #51), checked by
// code point ranges rather than against the list of recommended sequences,
// so that emoji newer than this build still pass:
//
//   - a flag: two regional indicators (🇫🇷);
//   - a keycap: 0–9, # or *, an optional U+FE0F, then U+20E3 (1️⃣);
//   - a subdivision flag: 🏴, tag characters, the cancel tag (🏴󠁧󠁢󠁳󠁣󠁴󠁿);
//   - one or more pictographs joined by U+200D (ZWJ), each optionally
//     followed by U+FE0F and by a skin-tone modifier (👍🏽, ❤️, 👩‍👩‍👧, 🧑🏿‍🚀).
//
// A pictograph is a code point in the blocks where emoji live (U+2190–2BFF
// symbols and dingbats, U+1F000–1FAFF, and the few others below); what is
// not an emoji in those blocks may pass, text and digits never do.
func isOneEmoji(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	r := []rune(s)
	if len(r) == 0 || len(r) > maxEmojiRunes {
		return false
	}
	switch {
	case isRegionalIndicator(r[0]):
		return len(r) == 2 && isRegionalIndicator(r[1])
	case strings.ContainsRune("0123456789#*", r[0]):
		rest := r[1:]
		if len(rest) > 0 && rest[0] == variationEmoji {
			rest = rest[1:]
		}
		return len(rest) == 1 && rest[0] == keycap
	case r[0] == blackFlag && len(r) > 1 && isTag(r[1]):
		for _, c := range r[1 : len(r)-1] {
			if !isTag(c) {
				return false
			}
		}
		return len(r) >= 3 && r[len(r)-1] == cancelTag
	}
	for i := 0; ; {
		if i == len(r) || !isPictograph(r[i]) {
			return false
		}
		i++
		if i < len(r) && r[i] == variationEmoji {
			i++
		}
		if i < len(r) && isSkinTone(r[i]) {
			i++
		}
		if i == len(r) {
			return true
		}
		if r[i] != zwj {
			return false
		}
		i++
	}
}

const (
	maxEmojiRunes  = 32 // the longest recommended sequences have 10
	variationEmoji = 0xFE0F
	keycap         = 0x20E3
	zwj            = 0x200D
	blackFlag      = 0x1F3F4
	cancelTag      = 0xE007F
)

func isRegionalIndicator(c rune) bool { return c >= 0x1F1E6 && c <= 0x1F1FF }
func isTag(c rune) bool               { return c >= 0xE0020 && c <= 0xE007E }
func isSkinTone(c rune) bool          { return c >= 0x1F3FB && c <= 0x1F3FF }

// isPictograph reports whether c is in the ranges emoji are drawn from.
func isPictograph(c rune) bool {
	switch {
	case isRegionalIndicator(c), isSkinTone(c):
		return false
	case c >= 0x1F000 && c <= 0x1FAFF, c >= 0x2190 && c <= 0x21FF, c >= 0x2300 && c <= 0x23FF, c >= 0x25A0 && c <= 0x27BF,
		c >= 0x2900 && c <= 0x297F, c >= 0x2B00 && c <= 0x2BFF:
		return true
	}
	switch c {
	case 0x00A9, 0x00AE, 0x203C, 0x2049, 0x2122, 0x2139, 0x24C2, 0x3030, 0x303D, 0x3297, 0x3299:
		return true
	}
	return false
}
