package server

import (
	"bytes"

	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/handle"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/storage"
)

// blockedPrefix is the path of a blocked contact, before its handle.
const blockedPrefix = "/v1/contacts/blocked/"

// Contact lists a line has (contactListLine).
const (
	blockedList  = "blocked list"
	optedOutList = "list of opted-out contacts"
)

// contactListLine is the line named by ?from= (or a body's from) whose
// contact list (blockedList, optedOutList) a request reads or changes. The
// sandbox line has none: its owners share it, and a list of one would
// block the contact for the others, or show one the others' contacts.
func (s *Server) contactListLine(r *http.Request, from, list string) (storage.Line, error) {
	line, err := s.lineFor(r, from, "from")
	if err == nil && line.IsSandbox {
		err = httpapi.Invalid("from", "The sandbox line %s has no %s: its owners share it.", line.Handle, list)
	}
	return line, err
}

// queryListLine is contactListLine for the line named by ?from=.
func (s *Server) queryListLine(r *http.Request, list string) (storage.Line, error) {
	from, err := queryHandle(r, "from")
	if err != nil {
		return storage.Line{}, err
	}
	return s.contactListLine(r, from, list)
}

func (s *Server) listBlocked(w http.ResponseWriter, r *http.Request) error {
	if wantsCSV(r) {
		return s.exportBlocked(w, r)
	}
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	after, err := parseCursor(r, 'b', -1)
	if err != nil {
		return err
	}
	line, err := s.queryListLine(r, blockedList)
	if err != nil {
		return err
	}
	page, next, err := s.db.BlockedContacts(r.Context(), line.ID, string(after), limit)
	if err != nil {
		return err
	}
	writeContactPage(w, r, page, next, 'b', toAPIBlocked)
	return nil
}

// writeContactPage answers a page of a line's contacts, in handle order:
// next, the page's last handle when more follow, is the next cursor.
func writeContactPage[T, A any](w http.ResponseWriter, r *http.Request, page []T, next string, kind byte, toAPI func(T) A) {
	out := make([]A, len(page))
	for i, e := range page {
		out[i] = toAPI(e)
	}
	var cursor *string
	if next != "" {
		cursor = encodeCursor(kind, []byte(next))
	}
	httpapi.WriteJSON(w, http.StatusOK, httpapi.List(r.Context(), out, cursor))
}

// listOptedOut lists the contacts opted out of a line's messages.
func (s *Server) listOptedOut(w http.ResponseWriter, r *http.Request) error {
	limit, err := parseLimit(r)
	if err != nil {
		return err
	}
	after, err := parseCursor(r, 'o', -1)
	if err != nil {
		return err
	}
	line, err := s.queryListLine(r, optedOutList)
	if err != nil {
		return err
	}
	page, next, err := s.db.OptedOutContacts(r.Context(), line.ID, string(after), limit)
	if err != nil {
		return err
	}
	writeContactPage(w, r, page, next, 'o', func(o storage.OptOut) api.OptedOutContact {
		out := api.OptedOutContact{Handle: o.Handle, LineID: line.ID, OptedOutAt: o.At}
		if o.Word != "" {
			out.Word = &o.Word
		}
		return out
	})
	return nil
}

func toAPIBlocked(bc storage.BlockedContact) api.BlockedContact {
	return api.BlockedContact{Handle: bc.Handle, LineID: bc.LineID, CreatedAt: bc.CreatedAt}
}

// wantsCSV reports whether a list is asked for as CSV: by its .csv path,
// or by an Accept header that names text/csv.
func wantsCSV(r *http.Request) bool {
	if strings.HasSuffix(r.URL.Path, ".csv") {
		return true
	}
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		if mt, _, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/csv" {
			return true
		}
	}
	return false
}

// exportBlocked writes a line's whole blocked list as CSV: a header
// `handle`, then one handle per row, in handle order; what POST
// /v1/contacts/blocked.csv reads back.
func (s *Server) exportBlocked(w http.ResponseWriter, r *http.Request) error {
	line, err := s.queryListLine(r, blockedList)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	cw := csv.NewWriter(&buf)
	cw.Write([]string{"handle"})
	for after := ""; ; {
		page, next, err := s.db.BlockedContacts(r.Context(), line.ID, after, maxLimit)
		if err != nil {
			return err
		}
		for _, bc := range page {
			cw.Write([]string{bc.Handle})
		}
		if next == "" {
			break
		}
		after = next
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	w.Header().Set("Content-Disposition", fmt.Sprintf("attachment; filename=%q", "blocked-"+strings.TrimPrefix(line.Handle, "+")+".csv"))
	w.Header().Set("X-Request-Id", httpapi.RequestID(r.Context()))
	w.WriteHeader(http.StatusOK)
	_, err = w.Write(buf.Bytes())
	return err
}

func (s *Server) blockContact(w http.ResponseWriter, r *http.Request) error {
	b, err := s.readBody(r)
	if err != nil {
		return err
	}
	from, err := b.required("from")
	if err != nil {
		return err
	}
	raw, err := b.required("handle")
	if err != nil {
		return err
	}
	h, err := handle.Normalize(raw)
	if err != nil {
		return httpapi.BadHandle("handle", raw, err)
	}
	line, err := s.contactListLine(r, from, blockedList)
	if err != nil {
		return err
	}
	added, err := s.db.BlockContacts(r.Context(), line.ID, h)
	if err != nil {
		return err
	}
	bc, err := s.db.BlockedContact(r.Context(), line.ID, h)
	if err != nil {
		return err
	}
	status := http.StatusOK // blocked already
	if added == 1 {
		status = http.StatusCreated
	}
	out := toAPIBlocked(bc)
	out.RequestID = httpapi.RequestID(r.Context())
	httpapi.WriteJSON(w, status, out)
	return nil
}

func (s *Server) unblockContact(w http.ResponseWriter, r *http.Request) error {
	raw := strings.TrimPrefix(r.URL.Path, blockedPrefix)
	h, err := handle.Normalize(raw)
	if err != nil {
		return httpapi.BadHandle("handle", raw, err)
	}
	line, err := s.queryListLine(r, blockedList)
	if err != nil {
		return err
	}
	err = s.db.UnblockContact(r.Context(), line.ID, h)
	if errors.Is(err, storage.ErrNotFound) {
		return httpapi.NotFound("contact_not_blocked", "handle", "%s is not blocked on line %s.", h, line.Handle)
	}
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, api.UnblockedContact{Handle: h, LineID: line.ID, Deleted: true, RequestID: httpapi.RequestID(r.Context())})
	return nil
}

// importBlocked adds the handles of a CSV body to a line's blocked list,
// in one transaction: the rows that hold a valid handle are added, and
// the others reported, each with why.
func (s *Server) importBlocked(w http.ResponseWriter, r *http.Request) error {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "text/csv" {
		return httpapi.InvalidRequest("invalid_csv", "", "Send the file with Content-Type: text/csv: a header row `handle`, then one handle per row.")
	}
	data, err := s.readText(r, "invalid_csv", "send a CSV file: a header row `handle`, then one handle per row")
	if err != nil {
		return err
	}
	line, err := s.queryListLine(r, blockedList)
	if err != nil {
		return err
	}
	handles, rejected, err := readHandlesCSV(data)
	if err != nil {
		return err
	}
	added, err := s.db.BlockContacts(r.Context(), line.ID, handles...)
	if err != nil {
		return err
	}
	httpapi.WriteJSON(w, http.StatusOK, api.BlockedImport{Added: added, Blocked: len(handles), Rejected: rejected,
		RequestID: httpapi.RequestID(r.Context())})
	return nil
}

// readHandlesCSV reads the handles of a CSV file: the column named
// `handle` of its header row or, without a header naming one, the first
// column of every row. Each handle is normalised as the API does; a row
// whose handle is not valid is rejected, and a file that is not CSV is a
// 400.
func readHandlesCSV(data []byte) (handles []string, rejected []api.RejectedRow, err error) {
	cr := csv.NewReader(bytes.NewReader(data))
	cr.FieldsPerRecord = -1
	cr.TrimLeadingSpace = true
	col, seen := 0, map[string]bool{}
	rejected = []api.RejectedRow{}
	for row := 1; ; row++ {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, httpapi.InvalidRequest("invalid_csv", "", "The body is not a valid CSV file: %v.", err)
		}
		if row == 1 {
			if i := headerColumn(rec); i >= 0 {
				col = i
				continue
			}
		}
		if col >= len(rec) || strings.TrimSpace(rec[col]) == "" {
			if len(rec) == 1 && rec[0] == "" {
				continue // a blank line
			}
			rejected = append(rejected, api.RejectedRow{Row: row, Message: "The row has no handle."})
			continue
		}
		value := strings.TrimSpace(rec[col])
		h, err := handle.Normalize(value)
		if err != nil {
			rejected = append(rejected, api.RejectedRow{Row: row, Value: value, Message: httpapi.BadHandle("handle", value, err).Message})
			continue
		}
		if !seen[h] {
			seen[h] = true
			handles = append(handles, h)
		}
	}
	return handles, rejected, nil
}

// headerColumn is the index of the column named handle in a header row,
// or -1 when the row names none.
func headerColumn(rec []string) int {
	for i, f := range rec {
		if strings.EqualFold(strings.TrimSpace(strings.TrimPrefix(f, "\ufeff")), "handle") {
			return i
		}
	}
	return -1
}
