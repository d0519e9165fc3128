package keyword

import (
	"slices"
	"testing"
)

func TestFold(t *testing.T) {
	for in, want := range map[string]string{
		"stop":        "STOP",
		"  Stop \n":   "STOP",
		"arrêt":       "ARRET",
		"ARRE\u0302T": "ARRET", // decomposed already
		"opt   out":   "OPT OUT",
		"Désabonner":  "DESABONNER",
		"please stop": "PLEASE STOP",
		"":            "",
		"Stopp":       "STOPP",
	} {
		if got := Fold(in); got != want {
			t.Errorf("Fold(%q) = %q, want %q", in, got, want)
		}
	}
}

// The default lists share no word once folded: a message is one or the
// other.
func TestDefaultsDisjoint(t *testing.T) {
	out := FoldAll(DefaultOptOut)
	for _, w := range FoldAll(DefaultOptIn) {
		if slices.Contains(out, w) {
			t.Errorf("%q is in both default lists", w)
		}
	}
	if !slices.Contains(out, "ARRET") || !slices.Contains(out, "STOP") {
		t.Errorf("FoldAll(DefaultOptOut) = %q", out)
	}
}
