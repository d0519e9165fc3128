package route

import (
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"

	"github.com/blueline-app/blueline/fleet"
)

// UnavailableHeader names, comma-separated, the handles of the lines GET
// /v1/lines left out because their node is down.
const UnavailableHeader = "Blueline-Lines-Unavailable"

// lines answers GET /v1/lines: the local answer, then each other up node's,
// de-duplicated by line ID. A node that is down leaves its lines out,
// named in UnavailableHeader.
func (e *Entry) lines(w http.ResponseWriter, r *http.Request, next http.Handler) {
	d := &decider{w: w, header: w.Header().Clone(), hold: true}
	next.ServeHTTP(d, r)
	local := d.local()
	var list map[string]json.RawMessage
	var data []json.RawMessage
	if local.Status != http.StatusOK || json.Unmarshal(local.Body, &list) != nil || json.Unmarshal(list["data"], &data) != nil {
		e.answer(w, local)
		return
	}
	k, err := e.o.API.Authenticate(r)
	if err != nil {
		e.answer(w, local)
		return
	}
	entries, err := e.directory(r.Context())
	if err != nil {
		e.o.Log.Warn("fleet: reading the line directory", "err", err)
		e.answer(w, local)
		return
	}
	req := fleet.Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: requestHeader(r, &k)}
	nodes := otherNodes(entries, e.o.Node.Name())
	answers := make([][]json.RawMessage, len(nodes))
	downs := make([]bool, len(nodes))
	var wg sync.WaitGroup
	for i, node := range nodes {
		if !anyUp(e.o.Directory, linesOf(entries, node)) {
			downs[i] = true
			continue
		}
		wg.Go(func() {
			resp, err := e.forward(r, node, req)
			var l struct {
				Data []json.RawMessage `json:"data"`
			}
			switch {
			case errors.Is(err, fleet.ErrNodeDown) || errors.Is(err, fleet.ErrTimeout):
				downs[i] = true
			case err != nil:
				e.o.Log.Warn("fleet: listing another node's lines", "node", node, "err", err)
				downs[i] = true
			case resp.Status != http.StatusOK || json.Unmarshal(resp.Body, &l) != nil:
				e.o.Log.Warn("fleet: listing another node's lines", "node", node, "status", resp.Status)
				downs[i] = true
			default:
				answers[i] = l.Data
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, raw := range data {
		seen[lineID(raw)] = true
	}
	var unavailable []string
	for i, node := range nodes {
		if downs[i] {
			for _, l := range linesOf(entries, node) {
				unavailable = append(unavailable, l.Handle)
			}
			continue
		}
		for _, raw := range answers[i] {
			if id := lineID(raw); !seen[id] {
				seen[id] = true
				data = append(data, raw)
			}
		}
	}
	if data == nil {
		data = []json.RawMessage{}
	}
	list["data"], _ = json.Marshal(data)
	body, _ := json.Marshal(list)
	local.Body = append(body, '\n')
	local.Header.Del("Content-Length")
	if len(unavailable) > 0 {
		local.Header.Set(UnavailableHeader, strings.Join(unavailable, ", "))
	}
	e.answer(w, local)
}

func lineID(raw json.RawMessage) string {
	var l struct {
		ID string `json:"id"`
	}
	json.Unmarshal(raw, &l)
	return l.ID
}
