// Package keyword recognises the opt-out and opt-in keywords a contact
// texts to a line (STOP, START…) the way carriers do: the whole message,
// trimmed, with case and accents folded, so that "Stop", " stop " and
// "ARRÊT" match and "please stop texting me" does not.
package keyword

import (
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// DefaultOptOut are the opt-out words of a line that names none: the
// CTIA's and the large US carriers' English list, and the usual words in
// French, Spanish, Portuguese, German, Italian and Dutch.
var DefaultOptOut = []string{
	"STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT", "OPTOUT", "OPT OUT", "REVOKE",
	"ARRÊT", "ARRETER", "DÉSABONNER", // French
	"BAJA", "PARAR", "CANCELAR", "ALTO", // Spanish
	"SAIR", "PARE", // Portuguese
	"STOPP", "ABMELDEN", // German
	"ANNULLA", "FERMA", // Italian
	"AFMELDEN", // Dutch
}

// DefaultOptIn are the opt-in words of a line that names none.
var DefaultOptIn = []string{
	"START", "UNSTOP", "YES", "SUBSCRIBE",
	"ALTA", "INICIAR", // Spanish
	"ANMELDEN", // German
}

// Fold is a message or a word as it is compared: trimmed, runs of white
// space made one space, accents removed (canonical decomposition without
// its combining marks) and case folded to upper case.
func Fold(s string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(strings.Join(strings.Fields(s), " ")) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(unicode.ToUpper(r))
		}
	}
	return b.String()
}

// FoldAll folds every word of words.
func FoldAll(words []string) []string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = Fold(w)
	}
	return out
}
