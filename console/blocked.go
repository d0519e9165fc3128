package console

import (
	"net/http"
	"net/url"
	"slices"

	"github.com/blueline-app/blueline/client/api"
)

// blockedPage lists the blocked contacts of one line (?line=, else the
// first line that has a list) with forms to add and remove one, through
// the API's /v1/contacts/blocked.
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
	if lineHandle != "" {
		for cursor := ""; ; {
			var page api.List[api.BlockedContact]
			q := url.Values{"from": {lineHandle}, "limit": {"100"}, "cursor": {cursor}}
			if err := c.call(r, false, "GET", "/v1/contacts/blocked?"+q.Encode(), nil, &page); err != nil {
				p.Error = c.errorText(r, err)
				status = statusOf(err)
				break
			}
			blocked = append(blocked, page.Data...)
			if page.NextCursor == nil {
				break
			}
			cursor = *page.NextCursor
		}
	}
	p.fill(map[string]any{"Lines": lines, "Line": lineHandle, "Blocked": blocked})
	c.render(w, r, status, "blocked", nil, p)
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
