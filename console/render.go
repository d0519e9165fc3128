package console

import (
	"bytes"
	"errors"
	"html/template"
	"io/fs"
	"maps"
	"net/http"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// page is what every template gets.
type page struct {
	Title   string
	Nav     string // the menu entry to mark current
	Session *storage.Session
	Notice  string // what the last action did
	Error   string // what went wrong, shown above the page
	Data    any
	Now     time.Time
	Dev     bool // the daemon runs with --dev
}

// fill adds entries to the page's data, keeping those already there.
func (p *page) fill(entries map[string]any) {
	m, _ := p.Data.(map[string]any)
	if m == nil {
		m = map[string]any{}
	}
	maps.Copy(m, entries)
	p.Data = m
}

var funcs = template.FuncMap{
	"time": formatTime,
	"deref": func(s *string) string {
		if s == nil {
			return ""
		}
		return *s
	},
	"derefTime": func(v *int64) int64 {
		if v == nil {
			return 0
		}
		return *v
	},
	// isolate keeps text a page shows where no element can (the window's
	// title) from reordering what follows it: between FIRST STRONG ISOLATE
	// and POP DIRECTIONAL ISOLATE, as <bdi> does elsewhere.
	"isolate":   func(s string) string { return "\u2068" + s + "\u2069" },
	"has":       func(list []string, s string) bool { return slices.Contains(list, s) },
	"join":      strings.Join,
	"hasPrefix": strings.HasPrefix,
	"latency":   formatLatency,
}

// formatLatency shows one stage of a line's latency over the last day:
// its median and 99th percentile, and how many were timed.
func formatLatency(q api.LatencyQuantiles) string {
	if q.Count == 0 || q.P50Ms == nil || q.P99Ms == nil {
		return "none timed"
	}
	return "p50 " + formatMillis(*q.P50Ms) + " · p99 " + formatMillis(*q.P99Ms) + " (" + strconv.FormatInt(q.Count, 10) + ")"
}

// formatMillis shows a duration to a precision that reads at a glance:
// 85 ms, 2.4 s, 3m12s.
func formatMillis(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	switch {
	case d < time.Second:
		return strconv.FormatInt(ms, 10) + " ms"
	case d < time.Minute:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + " s"
	}
	return d.Round(time.Second).String()
}

// shared are the templates every page is parsed with: the layout, and
// the parts more than one page shows.
var shared = []string{"layout", "messages", "parts"}

// parsePages parses each page with the layout it fills in.
func parsePages() (map[string]*template.Template, error) {
	names, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, err
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".html")
		if slices.Contains(shared, base) {
			continue
		}
		files := []string{n}
		for _, s := range shared {
			files = append(files, "templates/"+s+".html")
		}
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, files...)
		if err != nil {
			return nil, err
		}
		pages[base] = t
	}
	return pages, nil
}

// render writes a page. It renders into a buffer first, so that a template
// error is a clean 500 rather than half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, s *storage.Session, p page) {
	if s == nil {
		if cur := currentSession(r.Context()); cur.ID != "" {
			s = &cur
		}
	}
	p.Session, p.Now, p.Dev = s, c.now(), c.opts.Dev
	if p.Nav == "" {
		p.Nav = name
	}
	var buf bytes.Buffer
	t := c.pages[name]
	if t == nil {
		c.log.Error("dashboard: no template", "name", name)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		c.log.Error("dashboard: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// fail answers an error: the API's own answer (a refusal, a bad input) as
// itself, anything else as an internal error, logged.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, s *storage.Session, err error) {
	if e, ok := errors.AsType[*apiError](err); ok {
		c.render(w, r, e.Status, "error", s, page{Title: "Refused", Error: e.Message})
		return
	}
	c.log.Error("dashboard", "path", r.URL.Path, "err", err)
	c.render(w, r, http.StatusInternalServerError, "error", s, page{Title: "Error", Error: "Something went wrong on the daemon; its log says what."})
}

// errorText is what to show of an error on the page it happened on.
func (c *Console) errorText(r *http.Request, err error) string {
	if e, ok := errors.AsType[*apiError](err); ok {
		return e.Message
	}
	c.log.Error("dashboard", "path", r.URL.Path, "err", err)
	return "Something went wrong on the daemon; its log says what."
}
