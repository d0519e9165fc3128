package route

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/blueline-app/blueline/storage"
)

// Files stay on the node that stored them; a message sent from another
// node's line may attach one all the same. The entry names, in a forwarded
// request, the files it references that are stored on the entry, each with
// a signed download URL of the entry; the serving node downloads those it
// lacks, over HTTP from the entry's public URL (node to node, never through
// NATS whose messages are small), and keeps them under the same ID before
// the API sees the request. So the reference SDK's "upload, then send" works
// through any node.

// hdrFile names a file of the entry that the request references: a JSON
// sharedFile per value. Never taken from a client's request.
const hdrFile = "Blueline-Fleet-File"

// fileFields are the request body's fields that hold file IDs.
var fileFields = []string{"attachments", "audio_message", "voice_note"}

// Files is what the routing needs of the node's file store.
type Files interface {
	// Shared is the file with this ID if stored on this node, and a signed
	// URL that downloads it.
	Shared(ctx context.Context, id string) (f storage.File, url string, ok bool)
	// Has reports whether the file is stored on this node.
	Has(ctx context.Context, id string) bool
	// Adopt stores body as f, keeping f's ID and metadata.
	Adopt(ctx context.Context, f storage.File, body io.Reader) error
}

type sharedFile struct {
	storage.File
	URL string `json:"url"`
}

// fileIDs are the file IDs a request body references.
func fileIDs(body []byte) []string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(body, &fields) != nil {
		return nil
	}
	var ids []string
	for _, name := range fileFields {
		var one string
		var many []string
		switch {
		case json.Unmarshal(fields[name], &one) == nil && strings.HasPrefix(one, "file_"):
			ids = append(ids, one)
		case json.Unmarshal(fields[name], &many) == nil:
			for _, id := range many {
				if strings.HasPrefix(id, "file_") {
					ids = append(ids, id)
				}
			}
		}
	}
	return ids
}

// shareFiles adds to h the files of body stored on this node.
func shareFiles(ctx context.Context, files Files, h http.Header, body []byte) {
	if files == nil {
		return
	}
	for _, id := range fileIDs(body) {
		if f, url, ok := files.Shared(ctx, id); ok {
			b, _ := json.Marshal(sharedFile{File: f, URL: url})
			h.Add(hdrFile, string(b))
		}
	}
}

// fileFetchTimeout bounds the download of one shared file.
const fileFetchTimeout = 2 * time.Minute

// adoptFiles downloads the files h names that this node lacks. A file that
// cannot be had is left out: the API then answers for it as for a file it
// does not know (404 file_not_found), and the log says why.
func adoptFiles(ctx context.Context, files Files, client *http.Client, h http.Header, log *slog.Logger) {
	if files == nil {
		return
	}
	for _, raw := range h.Values(hdrFile) {
		var sf sharedFile
		if err := json.Unmarshal([]byte(raw), &sf); err != nil || !storage.IDShaped(sf.ID, "file_") {
			log.Warn("fleet: a forwarded request names a file unreadably", "err", err)
			continue
		}
		if files.Has(ctx, sf.ID) {
			continue
		}
		if err := fetchFile(ctx, files, client, sf); err != nil {
			log.Warn("fleet: fetching a file of the entry node", "file_id", sf.ID, "err", err)
		}
	}
}

func fetchFile(ctx context.Context, files Files, client *http.Client, sf sharedFile) error {
	ctx, cancel := context.WithTimeout(ctx, fileFetchTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, sf.URL, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the entry answered %s", resp.Status)
	}
	return files.Adopt(ctx, sf.File, resp.Body)
}
