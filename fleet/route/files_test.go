package route

import (
	"slices"
	"testing"
)

// The file IDs a send references, in every field that holds one; nothing
// from a body that is not JSON, or from fields that hold other things.
func TestFileIDs(t *testing.T) {
	for _, c := range []struct {
		body string
		want []string
	}{
		{`{"attachments":["file_a","file_b"],"text":"file_c"}`, []string{"file_a", "file_b"}},
		{`{"audio_message":"file_x"}`, []string{"file_x"}},
		{`{"voice_note":"file_y","attachments":["not a file"]}`, []string{"file_y"}},
		{`{"attachments":"file_z"}`, []string{"file_z"}},
		{`{"audio_message":7}`, nil},
		{`not json`, nil},
	} {
		if got := fileIDs([]byte(c.body)); !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, want %q", c.body, got, c.want)
		}
	}
}
