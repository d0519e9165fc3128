package console

import (
	"encoding/json"
	"net/http"

	"github.com/blueline-app/blueline/client/api"
)

// draft is a draft waiting for approval as the Approvals page shows it:
// with its line's handle and its text, which the owner may change.
type draft struct {
	api.OutboxItem
	Line string
	// Text is the draft's text; HasText is false for an audio message or
	// a file alone, whose text cannot be replaced.
	Text    string
	HasText bool
}

// approvalsPage lists agent keys' drafts waiting for approval (GET
// /v1/outbox/waiting), each with its text to edit, Approve and Decline.
func (c *Console) approvalsPage(w http.ResponseWriter, r *http.Request, status int, p page) {
	lines, err := c.lines(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	var waiting api.List[api.OutboxItem]
	if err := c.call(r, false, "GET", "/v1/outbox/waiting", nil, &waiting); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	drafts := make([]draft, 0, len(waiting.Data))
	for _, it := range waiting.Data {
		d := draft{OutboxItem: it}
		if l, ok := lineByID(lines, it.LineID); ok {
			d.Line = l.Handle
		}
		var payload struct {
			Text *string `json:"text"`
		}
		if json.Unmarshal(it.Payload, &payload) == nil && payload.Text != nil {
			d.Text, d.HasText = *payload.Text, true
		}
		drafts = append(drafts, d)
	}
	p.Title = "Approvals"
	p.fill(map[string]any{"Drafts": drafts})
	c.render(w, r, status, "approvals", nil, p)
}

func (c *Console) approvals(w http.ResponseWriter, r *http.Request) {
	p := page{}
	switch r.URL.Query().Get("answered") {
	case api.ApprovalApproved:
		p.Notice = "Approved: the message is on its way."
	case api.ApprovalDeclined:
		p.Notice = "Declined: the message will not be sent."
	}
	c.approvalsPage(w, r, http.StatusOK, p)
}

// answerDraft approves (with the form's text, when it was changed) or
// declines a draft.
func (c *Console) answerDraft(approve bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body := map[string]any{"id": pathValue(r, "id")}
		path, answered := "/v1/outbox/decline", api.ApprovalDeclined
		if approve {
			path, answered = "/v1/outbox/approve", api.ApprovalApproved
			if text := r.PostFormValue("text"); r.PostForm.Has("text") && text != r.PostFormValue("original") {
				body["text"] = text
			}
		}
		if err := c.call(r, false, "POST", path, body, nil); err != nil {
			c.approvalsPage(w, r, statusOf(err), page{Error: c.errorText(r, err)})
			return
		}
		http.Redirect(w, r, "/dashboard/approvals?answered="+answered, http.StatusSeeOther)
	}
}
