package console

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/blueline-app/blueline/client/api"
)

// blockedPage lists the blocked contacts of one line (?line=, else the
// first line that has a list) with forms to add and remove one, and the
// contacts opted out of its messages, through the API's
// /v1/contacts/blocked and /v1/contacts/opted-out.
func (c *Console) blockedPage(w http.ResponseWriter, r *http.Request, status int, lineHandle string, p page) {
	all, err := c.lines(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	// The sandbox line has no blocked list.
	lines := slices.DeleteFunc(all, func(l api.Line) bool { return l.IsSandbox })
	p.Title = "Blocked contacts"
	if lineHandle == "" && len(lines) > 0 {
		lineHandle = lines[0].Handle
	}
	var blocked []api.BlockedContact
	var optedOut []api.OptedOutContact
	if lineHandle != "" {
		var err error
		if blocked, err = allPages[api.BlockedContact](c, r, "/v1/contacts/blocked", lineHandle); err == nil {
			optedOut, err = allPages[api.OptedOutContact](c, r, "/v1/contacts/opted-out", lineHandle)
		}
		if err != nil {
			p.Error = c.errorText(r, err)
			status = statusOf(err)
		}
	}
	p.fill(map[string]any{"Lines": lines, "Line": lineHandle, "Blocked": blocked, "OptedOut": optedOut})
	c.render(w, r, status, "blocked", nil, p)
}

// allPages reads every page of a line's contact list at path.
func allPages[T any](c *Console, r *http.Request, path, lineHandle string) ([]T, error) {
	var all []T
	for cursor := ""; ; {
		var page api.List[T]
		q := url.Values{"from": {lineHandle}, "limit": {"100"}, "cursor": {cursor}}
		if err := c.call(r, false, "GET", path+"?"+q.Encode(), nil, &page); err != nil {
			return all, err
		}
		all = append(all, page.Data...)
		if page.NextCursor == nil {
			return all, nil
		}
		cursor = *page.NextCursor
	}
}

func (c *Console) blocked(w http.ResponseWriter, r *http.Request) {
	p := page{}
	switch {
	case r.URL.Query().Get("added") != "":
		p.Notice = "The contact is blocked: its messages are stored without events, and the line sends it nothing."
	case r.URL.Query().Get("removed") != "":
		p.Notice = "The contact is no longer blocked."
	}
	c.blockedPage(w, r, http.StatusOK, r.URL.Query().Get("line"), p)
}

func (c *Console) blockContact(w http.ResponseWriter, r *http.Request) {
	line := r.PostFormValue("line")
	if err := c.call(r, false, "POST", "/v1/contacts/blocked", map[string]string{"from": line, "handle": r.PostFormValue("handle")}, nil); err != nil {
		c.blockedPage(w, r, statusOf(err), line, page{Error: c.errorText(r, err)})
		return
	}
	http.Redirect(w, r, "/dashboard/blocked?"+url.Values{"line": {line}, "added": {"1"}}.Encode(), http.StatusSeeOther)
}

func (c *Console) unblockContact(w http.ResponseWriter, r *http.Request) {
	line, h := r.PostFormValue("line"), r.PostFormValue("handle")
	path := "/v1/contacts/blocked/" + url.PathEscape(h) + "?" + url.Values{"from": {line}}.Encode()
	if err := c.call(r, false, "DELETE", path, nil, nil); err != nil {
		c.blockedPage(w, r, statusOf(err), line, page{Error: c.errorText(r, err)})
		return
	}
	http.Redirect(w, r, "/dashboard/blocked?"+url.Values{"line": {line}, "removed": {"1"}}.Encode(), http.StatusSeeOther)
}
