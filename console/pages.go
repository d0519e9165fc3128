package console

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/storage"
)

// A message as a page shows it: with its tapbacks and the message it
// replies to, when that is among those shown.
type message struct {
	api.Message
	Reactions []api.Reaction
	ReplyTo   *message
}

// outboxItem is an item with what the outbox page adds: its kind, its
// line's handle, who it goes to (and the conversation, when there is one
// to open) and what it says.
type outboxItem struct {
	api.OutboxItem
	Kind      string
	Line      string
	Recipient string
	ChatLink  string // the chat's ID
	Preview   string
}

// previewRunes is how much of a text the outbox shows.
const previewRunes = 80

// outboxPreview is what an item says, in a few words.
func outboxPreview(it storage.OutboxItem) string {
	text := ""
	switch {
	case it.Text != nil:
		text = *it.Text
	case it.Kind == storage.KindReaction && it.ReactionEmoji != "":
		text = it.ReactionEmoji
	case it.Kind == storage.KindReaction:
		text = it.ReactionType
	case it.GroupName != "":
		text = it.GroupName
	}
	if len(it.FileIDs) > 0 {
		text = strings.TrimSpace(fmt.Sprintf("%s (%d files)", text, len(it.FileIDs)))
	}
	if r := []rune(text); len(r) > previewRunes {
		text = string(r[:previewRunes-1]) + "…"
	}
	return text
}

// webhookInfo is a webhook as the Webhooks page lists it: with its line's
// handle, its owner, its state, and what its counters on the overview count.
type webhookInfo struct {
	api.WebhookInfo
	Waiting     int // deliveries waiting for an attempt
	FailedToday int // failed attempts since the day before
}

func (c *Console) lines(r *http.Request) ([]api.Line, error) {
	var l api.List[api.Line]
	err := c.call(r, false, "GET", "/v1/lines", nil, &l)
	return l.Data, err
}

func lineByID(lines []api.Line, id string) (api.Line, bool) {
	i := slices.IndexFunc(lines, func(l api.Line) bool { return l.ID == id })
	if i < 0 {
		return api.Line{}, false
	}
	return lines[i], true
}

// lineHealth is one line's row on the overview.
type lineHealth struct {
	api.Line
	Node         string // in a fleet, the node serving the line
	Bridge       string
	OK           bool
	Reason, Info string
	LastInbound  int64
	LastOutbound int64
	// Doctor is set on a Messages line that is not healthy: `blueline
	// doctor` on the host checks what it depends on, with the fixes.
	Doctor bool
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	lines, err := c.lines(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	sc, err := c.scopeOf(r, lines)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	var checks []api.Check
	if c.opts.Health != nil {
		checks = c.opts.Health(ctx)
	}
	last, err := c.lastTraffic(ctx, sc)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	rows := make([]lineHealth, len(lines))
	for i, l := range lines {
		rows[i] = lineHealth{Line: l, OK: true, LastInbound: last[l.ID][0], LastOutbound: last[l.ID][1]}
		if sl, ok := c.opts.DB.LineByID(l.ID); ok {
			rows[i].Bridge = sl.Bridge
		}
		if j := slices.IndexFunc(checks, func(ch api.Check) bool { return ch.Name == "line "+l.Handle }); j >= 0 {
			rows[i].OK, rows[i].Reason, rows[i].Info = checks[j].OK, checks[j].Reason, checks[j].Info
		}
		rows[i].Doctor = rows[i].Bridge == "messages" && (!rows[i].OK || (l.Health != nil && len(messages.HealthProblems(l.Health.Summary)) > 0))
	}
	// In a fleet: each line's node, and the nodes (the admin socket's
	// answer; none without [fleet]).
	var fleet api.FleetStatus
	if err := c.call(r, true, http.MethodGet, "/fleet", nil, &fleet); err == nil {
		for i := range rows {
			j := slices.IndexFunc(fleet.Lines, func(fl api.FleetLine) bool { return fl.Handle == rows[i].Handle })
			if j < 0 {
				continue
			}
			rows[i].Node = fleet.Lines[j].Node
			if fleet.Lines[j].Node != fleet.Node {
				rows[i].OK, rows[i].Reason = fleet.Lines[j].Up, "its node "+fleet.Lines[j].Node+" is down"
			}
		}
	}
	var workers []api.Check
	for _, ch := range checks {
		if !strings.HasPrefix(ch.Name, "line ") {
			workers = append(workers, ch)
		}
	}
	dayAgo := c.now().Add(-24 * time.Hour).UnixMilli()
	queues, failedToday, err := c.outboxFigures(ctx, sc, dayAgo)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	data := map[string]any{
		"Lines": rows, "Workers": workers, "Queues": queues, "FailedToday": failedToday, "DayAgo": dayAgo,
		"Version": c.opts.Version, "Uptime": c.now().Sub(c.opts.Started).Round(time.Second).String(), "Started": c.opts.Started.UnixMilli(),
		"GoVersion": runtime.Version(), "OS": runtime.GOOS + "/" + runtime.GOARCH, "Fleet": fleet,
	}
	if c.opts.TLS != nil {
		data["TLS"] = c.opts.TLS()
	}
	// The webhooks' figures are the sums of the Webhooks page's rows.
	hooks, err := c.visibleWebhooks(r, lines)
	if err == nil {
		err = c.countWebhooks(r, hooks, dayAgo)
	}
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	queues.WebhookDeliveries = 0
	failures := 0
	for _, h := range hooks {
		queues.WebhookDeliveries += h.Waiting
		failures += h.FailedToday
	}
	data["Queues"], data["WebhookFailures"] = queues, failures
	c.render(w, r, http.StatusOK, "overview", nil, page{Title: "Overview", Data: data})
}

// scope is what an owner's session may count on the overview, as the API
// lists it for the session: its lines, and on the sandbox line only the
// owner's own chats. The operator's overview has none: it counts all.
type scope struct {
	lines        map[string]bool // line IDs
	sandboxLines map[string]bool // those of them that are the sandbox's
	sandbox      map[string]bool // the owner's chat IDs on the sandbox line
}

func (c *Console) scopeOf(r *http.Request, lines []api.Line) (*scope, error) {
	if currentSession(r.Context()).Owner == "" {
		return nil, nil
	}
	sc := &scope{lines: map[string]bool{}, sandboxLines: map[string]bool{}, sandbox: map[string]bool{}}
	for _, l := range lines {
		sc.lines[l.ID] = true
		if !l.IsSandbox {
			continue
		}
		sc.sandboxLines[l.ID] = true
		// An owner has one sandbox chat, paired with one phone: a page holds it.
		var chats api.List[api.Chat]
		if err := c.call(r, false, "GET", "/v1/chats?limit=100&from="+url.QueryEscape(l.Handle), nil, &chats); err != nil {
			return nil, err
		}
		for _, ch := range chats.Data {
			sc.sandbox[ch.ID] = true
		}
	}
	return sc, nil
}

// sees reports whether what happened in a chat of a line counts; a nil
// scope counts everything.
func (sc *scope) sees(lineID, chatID string) bool {
	if sc == nil {
		return true
	}
	if sc.sandboxLines[lineID] {
		return sc.sandbox[chatID]
	}
	return sc.lines[lineID]
}

// outboxFigures are the outbox's items waiting and being sent, and those
// failed since dayAgo, within sc.
func (c *Console) outboxFigures(ctx context.Context, sc *scope, dayAgo int64) (storage.QueueStats, int, error) {
	var queues storage.QueueStats
	var err error
	if sc == nil {
		if queues, err = c.opts.DB.QueueStats(ctx); err != nil {
			return queues, 0, err
		}
	}
	count := func(status string, since int64) (int, error) {
		items, _, err := c.opts.DB.RecentOutbox(ctx, storage.OutboxFilter{Status: status, Since: since}, "", 1000, 20000)
		n := 0
		for _, it := range items {
			if sc.sees(it.LineID, it.ChatID) {
				n++
			}
		}
		return n, err
	}
	failed, err := count(storage.StatusFailed, dayAgo)
	if err != nil || sc == nil {
		return queues, failed, err
	}
	if queues.OutboxPending, err = count(storage.StatusPending, 0); err != nil {
		return queues, failed, err
	}
	queues.OutboxClaimed, err = count(storage.StatusClaimed, 0)
	return queues, failed, err
}

// lastTraffic finds each line's last message received and sent among the
// recent events within sc: [0] inbound, [1] outbound (Unix ms, 0 for none
// seen).
func (c *Console) lastTraffic(ctx context.Context, sc *scope) (map[string][2]int64, error) {
	const window = 5000
	last, err := c.opts.DB.LastEventSeq(ctx)
	if err != nil {
		return nil, err
	}
	events, err := c.opts.DB.Events(ctx, max(last, window)-window, window)
	if err != nil {
		return nil, err
	}
	out := map[string][2]int64{}
	for _, e := range events {
		if !sc.sees(e.LineID, e.ChatID) {
			continue
		}
		t := out[e.LineID]
		switch e.Name {
		case api.EventMessageReceived:
			t[0] = e.At
		case api.EventMessageSent:
			t[1] = e.At
		}
		out[e.LineID] = t
	}
	return out, nil
}

// keyInfo is a key as the admin socket lists it.
type keyInfo = api.KeyInfo

func (c *Console) ownKeys(r *http.Request) ([]keyInfo, error) {
	var l api.List[keyInfo]
	if err := c.call(r, true, "GET", "/keys", nil, &l); err != nil {
		return nil, err
	}
	owner := currentSession(r.Context()).Owner
	if owner == "" {
		return l.Data, nil
	}
	return slices.DeleteFunc(l.Data, func(k keyInfo) bool { return k.Owner != owner }), nil
}

func (c *Console) keysPage(w http.ResponseWriter, r *http.Request, status int, p page) {
	keys, err := c.ownKeys(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	lines, err := c.lines(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	p.fill(map[string]any{"Keys": keys, "Lines": lines, "Scopes": api.Scopes})
	p.Title = "API keys"
	c.render(w, r, status, "keys", nil, p)
}

func (c *Console) keys(w http.ResponseWriter, r *http.Request) {
	p := page{}
	if r.URL.Query().Get("revoked") != "" {
		p.Notice = "The key is revoked: requests made with it are refused from now on."
	}
	c.keysPage(w, r, http.StatusOK, p)
}

func (c *Console) createKey(w http.ResponseWriter, r *http.Request) {
	s := currentSession(r.Context())
	scopes := r.PostForm["scope"]
	req := api.KeyRequest{Label: r.PostFormValue("label"), Scopes: strings.Join(scopes, ","), Lines: r.PostForm["line"],
		Owner: r.PostFormValue("owner"), Agent: r.PostFormValue("agent") != "", Approval: r.PostFormValue("approval"),
		ApprovalExcept: strings.Split(r.PostFormValue("approval_except"), ","), GroupMention: r.PostFormValue("group_mention")}
	for _, h := range strings.Split(r.PostFormValue("allow_from"), ",") {
		if h = strings.TrimSpace(h); h != "" {
			req.AllowFrom = append(req.AllowFrom, h)
		}
	}
	if s.Owner != "" {
		req.Owner = s.Owner // an owner creates keys of their own only
	}
	if len(scopes) == 0 {
		c.keysPage(w, r, http.StatusBadRequest, page{Error: "Choose at least one scope."})
		return
	}
	var created keyInfo
	if err := c.call(r, true, "POST", "/keys", req, &created); err != nil {
		c.keysPage(w, r, statusOf(err), page{Error: c.errorText(r, err)})
		return
	}
	c.keysPage(w, r, http.StatusCreated, page{Notice: "Key created. Copy it now: it is not shown again.",
		Data: map[string]any{"Created": created}})
}

func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := pathValue(r, "id")
	keys, err := c.ownKeys(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	if !slices.ContainsFunc(keys, func(k keyInfo) bool { return k.ID == id }) {
		c.keysPage(w, r, http.StatusNotFound, page{Error: fmt.Sprintf("No active key %s.", id)})
		return
	}
	if err := c.call(r, true, "POST", "/keys/revoke", map[string]string{"id": id}, nil); err != nil {
		c.keysPage(w, r, statusOf(err), page{Error: c.errorText(r, err)})
		return
	}
	http.Redirect(w, r, "/dashboard/keys?revoked=1", http.StatusSeeOther)
}

func statusOf(err error) int {
	if e, ok := errors.AsType[*apiError](err); ok {
		return e.Status
	}
	return http.StatusInternalServerError
}

func (c *Console) chats(w http.ResponseWriter, r *http.Request) {
	lines, err := c.lines(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	data := map[string]any{"Lines": lines}
	p := page{Title: "Conversations", Data: data}
	if len(lines) == 0 {
		c.render(w, r, http.StatusOK, "chats", nil, p)
		return
	}
	q := r.URL.Query()
	cur := lines[0]
	if currentSession(r.Context()).Owner == "" {
		// The sandbox's chats are its owners': the operator starts elsewhere.
		if i := slices.IndexFunc(lines, func(l api.Line) bool { return !l.IsSandbox }); i >= 0 {
			cur = lines[i]
		}
	}
	if h := q.Get("line"); h != "" {
		i := slices.IndexFunc(lines, func(l api.Line) bool { return l.Handle == h })
		if i < 0 {
			p.Error = fmt.Sprintf("No line %s.", h)
			c.render(w, r, http.StatusNotFound, "chats", nil, p)
			return
		}
		cur = lines[i]
	}
	data["Line"] = cur
	if cur.IsSandbox && currentSession(r.Context()).Owner == "" {
		// The API keeps each sandbox conversation to its owner: rather
		// than its refusal, what the operator can do instead.
		data["OwnersOnly"] = true
		c.render(w, r, http.StatusOK, "chats", nil, p)
		return
	}
	v := url.Values{"from": {cur.Handle}, "limit": {"50"}}
	if a := q.Get("after"); a != "" {
		v.Set("after", a)
	}
	var chats api.List[api.Chat]
	if err := c.call(r, false, "GET", "/v1/chats?"+v.Encode(), nil, &chats); err != nil {
		p.Error = c.errorText(r, err)
		c.render(w, r, statusOf(err), "chats", nil, p)
		return
	}
	data["Chats"], data["Next"] = chats.Data, chats.NextCursor
	c.render(w, r, http.StatusOK, "chats", nil, p)
}

// chatView is a chat with its latest messages, oldest first.
type chatView struct {
	Chat     api.Chat
	Line     api.Line
	Messages []message
	// Typing are the chat's members typing now.
	Typing []api.Indicator
	After  uint64 // the last event included, where live updates resume
	// HumanActiveUntil is, while the owner has the chat (they wrote in it
	// from their own devices), when agent keys may write to it again
	// (Unix ms); 0 otherwise.
	HumanActiveUntil int64
}

// loadChat reads a chat through the API, so that a chat the session may
// not see is not found.
func (c *Console) loadChat(r *http.Request, id string) (chatView, error) {
	var v chatView
	after, err := c.opts.DB.LastEventSeq(r.Context())
	if err != nil {
		return v, err
	}
	v.After = after
	if !storage.IDShaped(id, "cht_") {
		return v, &apiError{Status: http.StatusNotFound, Message: "No chat " + id + "."}
	}
	sc, err := c.opts.DB.ChatByID(r.Context(), id)
	if errors.Is(err, storage.ErrNotFound) {
		return v, &apiError{Status: http.StatusNotFound, Message: "No chat " + id + "."}
	}
	if err != nil {
		return v, err
	}
	lines, err := c.lines(r)
	if err != nil {
		return v, err
	}
	l, ok := lineByID(lines, sc.LineID)
	if !ok {
		return v, &apiError{Status: http.StatusNotFound, Message: "No chat " + id + "."}
	}
	v.Line = l
	q := url.Values{"from": {l.Handle}, "to": {id}, "limit": {"50"}}
	var msgs api.List[message]
	if err := c.call(r, false, "GET", "/v1/messages?"+q.Encode(), nil, &msgs); err != nil {
		return v, err
	}
	// The chat's own record, as the API shows it (name, participants).
	v.Chat = api.Chat{ID: sc.ID, LineID: sc.LineID, Identifier: sc.Identifier, Service: sc.Service, IsGroup: sc.IsGroup, Participants: sc.Participants}
	if sc.Name != "" {
		v.Chat.Name = &sc.Name
	}
	byGUID := map[string]*message{}
	slices.SortFunc(msgs.Data, func(a, b message) int { return cmp.Compare(a.SentAt, b.SentAt) })
	for i := range msgs.Data {
		m := &msgs.Data[i]
		byGUID[m.GUID] = m
		var rs api.List[api.Reaction]
		if err := c.call(r, false, "GET", "/v1/reactions?message_id="+url.QueryEscape(m.ID), nil, &rs); err != nil {
			return v, err
		}
		m.Reactions = rs.Data
	}
	for i := range msgs.Data {
		if g := msgs.Data[i].ReplyToGUID; g != nil {
			msgs.Data[i].ReplyTo = byGUID[*g]
		}
	}
	v.Messages = msgs.Data
	var typing api.List[api.Indicator]
	if err := c.call(r, false, "GET", "/v1/typing?"+url.Values{"from": {l.Handle}, "to": {id}}.Encode(), nil, &typing); err != nil {
		return v, err
	}
	v.Typing = slices.DeleteFunc(typing.Data, func(ind api.Indicator) bool { return !ind.IsTyping })
	h, err := c.opts.DB.HandoffOf(r.Context(), id)
	switch {
	case err == nil && h.Until > time.Now().UnixMilli():
		v.HumanActiveUntil = h.Until
	case err != nil && !errors.Is(err, storage.ErrNotFound):
		return v, err
	}
	return v, nil
}

func (c *Console) chat(w http.ResponseWriter, r *http.Request) {
	v, err := c.loadChat(r, pathValue(r, "id"))
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	p := page{Title: chatTitle(v.Chat), Nav: "chats", Data: v}
	if id := r.URL.Query().Get("sent"); storage.IDShaped(id, "obx_") {
		p.Notice = "Accepted as outbox item " + id + "."
	}
	if r.URL.Query().Get("resumed") != "" {
		p.Notice = "Agents resumed: agent keys may write to this chat again."
	}
	c.render(w, r, http.StatusOK, "chat", nil, p)
}

func chatTitle(ch api.Chat) string {
	if ch.Name != nil && *ch.Name != "" {
		return *ch.Name
	}
	return ch.Identifier
}

func (c *Console) reply(w http.ResponseWriter, r *http.Request) {
	id := pathValue(r, "id")
	v, err := c.loadChat(r, id)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	text := r.PostFormValue("text")
	var item api.OutboxItem
	err = c.call(r, false, "POST", "/v1/messages", map[string]any{"from": v.Line.Handle, "to": id, "text": text}, &item)
	if err != nil {
		c.render(w, r, statusOf(err), "chat", nil, page{Title: chatTitle(v.Chat), Nav: "chats", Data: v, Error: c.errorText(r, err)})
		return
	}
	http.Redirect(w, r, "/dashboard/chats/"+id+"?sent="+item.ID, http.StatusSeeOther)
}

// resumeAgents gives a chat the owner took over back to the agents: the
// console's Resume agents button.
func (c *Console) resumeAgents(w http.ResponseWriter, r *http.Request) {
	id := pathValue(r, "id")
	v, err := c.loadChat(r, id)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	var res api.ChatResume
	if err := c.call(r, false, "POST", "/v1/chats/resume", map[string]any{"from": v.Line.Handle, "to": id}, &res); err != nil {
		c.render(w, r, statusOf(err), "chat", nil, page{Title: chatTitle(v.Chat), Nav: "chats", Data: v, Error: c.errorText(r, err)})
		return
	}
	http.Redirect(w, r, "/dashboard/chats/"+id+"?resumed=1", http.StatusSeeOther)
}

func (c *Console) outbox(w http.ResponseWriter, r *http.Request) {
	lines, err := c.lines(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	q := r.URL.Query()
	f := storage.OutboxFilter{Status: q.Get("status")}
	data := map[string]any{"Lines": lines, "Status": f.Status, "LineHandle": q.Get("line"), "Since": int64(0),
		"Statuses": []string{storage.StatusPending, storage.StatusClaimed, storage.StatusSent, storage.StatusFailed}}
	p := page{Title: "Outbox", Data: data}
	if f.Status != "" && !slices.Contains(data["Statuses"].([]string), f.Status) {
		p.Error = "No status " + f.Status + "."
		c.render(w, r, http.StatusBadRequest, "outbox", nil, p)
		return
	}
	if h := q.Get("line"); h != "" {
		i := slices.IndexFunc(lines, func(l api.Line) bool { return l.Handle == h })
		if i < 0 {
			p.Error = "No line " + h + "."
			c.render(w, r, http.StatusNotFound, "outbox", nil, p)
			return
		}
		f.LineID = lines[i].ID
	}
	// The overview's "failed in the last day" lists those accepted since.
	if v := q.Get("since"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			p.Error = "since is a time in Unix milliseconds, not " + strconv.Quote(v) + "."
			c.render(w, r, http.StatusBadRequest, "outbox", nil, p)
			return
		}
		f.Since, data["Since"] = ms, ms
	}
	before := q.Get("before")
	if before != "" && !storage.IDShaped(before, "obx_") {
		before = ""
	}
	stored, next, err := c.opts.DB.RecentOutbox(r.Context(), f, before, 50, 5000)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	operator := currentSession(r.Context()).Owner == ""
	items := make([]outboxItem, 0, len(stored))
	for _, it := range stored {
		// Each item through the API: an item the session may not see (a
		// line or sandbox of another) is left out.
		var item outboxItem
		l, _ := lineByID(lines, it.LineID)
		item.Kind, item.Line = it.Kind, l.Handle
		if err := c.call(r, false, "GET", "/v1/outbox?id="+url.QueryEscape(it.ID), nil, &item.OutboxItem); err != nil {
			if statusOf(err) >= 500 {
				c.fail(w, r, nil, err)
				return
			}
			// The operator's overview counts the owners' sandbox items
			// too: listed, so that the counts add up, but not what they
			// say or to whom, which is the owner's.
			if operator && l.IsSandbox {
				item.OutboxItem = api.OutboxItem{ID: it.ID, LineID: it.LineID, Status: it.Status, Attempts: it.Attempts,
					MaxAttempts: it.MaxAttempts, CreatedAt: it.CreatedAt}
				if it.CompletedAt != 0 {
					item.CompletedAt = &it.CompletedAt
				}
				if it.Error != "" {
					item.Error = &it.Error
				}
				item.Recipient = "an owner's sandbox"
				items = append(items, item)
			}
			continue
		}
		item.Preview = outboxPreview(it)
		// The item is the session's (the API showed it): so is its chat.
		if it.ChatID != "" {
			ch, err := c.opts.DB.ChatByID(r.Context(), it.ChatID)
			if err != nil && !errors.Is(err, storage.ErrNotFound) {
				c.fail(w, r, nil, err)
				return
			}
			if err == nil {
				item.Recipient, item.ChatLink = cmp.Or(ch.Name, ch.Identifier), ch.ID
			}
		} else if len(it.Participants) > 0 {
			item.Recipient = strings.Join(it.Participants, ", ")
		}
		items = append(items, item)
	}
	data["Items"], data["Next"] = items, next
	c.render(w, r, http.StatusOK, "outbox", nil, p)
}

// visibleWebhooks are the webhooks the session may see: the operator's,
// every owner's (as `blueline webhooks list` on the host); an owner's, the
// active ones the API lists for the owner, on every line the owner may use
// (a webhook of several lines once, with their handles).
func (c *Console) visibleWebhooks(r *http.Request, lines []api.Line) ([]webhookInfo, error) {
	ctx := r.Context()
	var out []webhookInfo
	if currentSession(ctx).Owner == "" {
		var all api.List[api.WebhookInfo]
		if err := c.call(r, true, "GET", "/webhooks", nil, &all); err != nil {
			return nil, err
		}
		for _, h := range all.Data {
			out = append(out, webhookInfo{WebhookInfo: h})
		}
	} else {
		seen := map[string]int{}
		for _, l := range lines {
			var hooks api.List[api.Webhook]
			if err := c.call(r, false, "GET", "/v1/webhooks?from="+url.QueryEscape(l.Handle), nil, &hooks); err != nil {
				return nil, err
			}
			for _, h := range hooks.Data {
				if i, ok := seen[h.ID]; ok {
					out[i].Line += "," + l.Handle
					continue
				}
				seen[h.ID] = len(out)
				// The state the API does not show: the stored record's.
				sh, err := c.opts.DB.WebhookByID(ctx, h.ID)
				if err != nil {
					return nil, err
				}
				out = append(out, webhookInfo{WebhookInfo: api.WebhookInfo{ID: h.ID, Line: l.Handle, Owner: sh.Owner, URL: h.URL,
					Events: h.Events, IsActive: h.IsActive, FailingSince: sh.FailingSince, CreatedAt: h.CreatedAt}})
			}
		}
	}
	return out, nil
}

// countWebhooks fills in each webhook's deliveries waiting and attempts
// failed since dayAgo.
func (c *Console) countWebhooks(r *http.Request, hooks []webhookInfo, dayAgo int64) error {
	if len(hooks) == 0 {
		return nil
	}
	// The attempts are kept newest first: those of the last day lead.
	var attempts api.List[storage.Attempt]
	if err := c.call(r, true, "GET", "/webhooks/attempts?limit=10000", nil, &attempts); err != nil {
		return err
	}
	failed := map[string]int{}
	for _, a := range attempts.Data {
		if a.At < dayAgo {
			break
		}
		if a.Error != "" {
			failed[a.WebhookID]++
		}
	}
	for i := range hooks {
		n, err := c.opts.DB.WaitingDeliveries(r.Context(), hooks[i].ID)
		if err != nil {
			return err
		}
		hooks[i].Waiting, hooks[i].FailedToday = n, failed[hooks[i].ID]
	}
	return nil
}

func (c *Console) webhooksPage(w http.ResponseWriter, r *http.Request, status int, p page) {
	lines, err := c.lines(r)
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	hooks, err := c.visibleWebhooks(r, lines)
	if err == nil {
		err = c.countWebhooks(r, hooks, c.now().Add(-24*time.Hour).UnixMilli())
	}
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	// The operator sees every owner's webhooks, and picks one owner's.
	var owners []string
	for _, h := range hooks {
		if h.Owner != "" && !slices.Contains(owners, h.Owner) {
			owners = append(owners, h.Owner)
		}
	}
	slices.Sort(owners)
	owner := r.URL.Query().Get("owner")
	if owner != "" {
		hooks = slices.DeleteFunc(hooks, func(h webhookInfo) bool { return h.Owner != owner })
	}
	p.fill(map[string]any{"Webhooks": hooks, "Owners": owners, "Owner": owner, "Lines": lines,
		"Events": api.WebhookEvents, "StandardEvents": api.StandardEvents})
	p.Title = "Webhooks"
	c.render(w, r, status, "webhooks", nil, p)
}

func (c *Console) webhooks(w http.ResponseWriter, r *http.Request) {
	p := page{}
	if r.URL.Query().Get("deleted") != "" {
		p.Notice = "The webhook is deleted."
	}
	c.webhooksPage(w, r, http.StatusOK, p)
}

func (c *Console) createWebhook(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"from": r.PostFormValue("line"), "url": r.PostFormValue("url"), "events": r.PostForm["event"]}
	if r.PostForm["event"] == nil {
		body["events"] = []string{}
	}
	var created api.Webhook
	if err := c.call(r, false, "POST", "/v1/webhooks", body, &created); err != nil {
		c.webhooksPage(w, r, statusOf(err), page{Error: c.errorText(r, err)})
		return
	}
	c.webhooksPage(w, r, http.StatusCreated, page{Notice: "Webhook created. Copy its signing secret now: it is not shown again.",
		Data: map[string]any{"Created": created}})
}

// findWebhook is a webhook the session may see, or a not-found answer.
func (c *Console) findWebhook(r *http.Request, id string) (webhookInfo, error) {
	lines, err := c.lines(r)
	if err != nil {
		return webhookInfo{}, err
	}
	hooks, err := c.visibleWebhooks(r, lines)
	if err != nil {
		return webhookInfo{}, err
	}
	i := slices.IndexFunc(hooks, func(h webhookInfo) bool { return h.ID == id })
	if i < 0 {
		return webhookInfo{}, &apiError{Status: http.StatusNotFound, Message: "No webhook " + id + "."}
	}
	return hooks[i], nil
}

func (c *Console) webhookPage(w http.ResponseWriter, r *http.Request, status int, p page) {
	h, err := c.findWebhook(r, pathValue(r, "id"))
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	var attempts api.List[storage.Attempt]
	if err := c.call(r, true, "GET", "/webhooks/attempts?limit=100&webhook="+url.QueryEscape(h.ID), nil, &attempts); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	p.fill(map[string]any{"Webhook": h, "Attempts": attempts.Data})
	p.Title, p.Nav = "Webhook "+h.ID, "webhooks"
	c.render(w, r, status, "webhook", nil, p)
}

func (c *Console) webhook(w http.ResponseWriter, r *http.Request) {
	p := page{}
	if id := r.URL.Query().Get("redelivered"); storage.IDShaped(id, "dlv_") {
		p.Notice = "Delivery " + id + " is queued again."
	}
	c.webhookPage(w, r, http.StatusOK, p)
}

func (c *Console) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	h, err := c.findWebhook(r, pathValue(r, "id"))
	switch {
	case err != nil:
	case currentSession(r.Context()).Owner == "" && h.Owner != "":
		// An owner's webhook on the sandbox is the owner's alone in the API.
		err = c.callAsOwner(r, h.Owner, "DELETE", "/v1/webhooks", map[string]string{"id": h.ID}, nil)
	default:
		err = c.call(r, false, "DELETE", "/v1/webhooks", map[string]string{"id": h.ID}, nil)
	}
	if err != nil {
		c.webhooksPage(w, r, statusOf(err), page{Error: c.errorText(r, err)})
		return
	}
	http.Redirect(w, r, "/dashboard/webhooks?deleted=1", http.StatusSeeOther)
}

func (c *Console) testWebhook(w http.ResponseWriter, r *http.Request) {
	h, err := c.findWebhook(r, pathValue(r, "id"))
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	var res struct {
		Event      string `json:"event"`
		StatusCode int    `json:"status_code"`
		LatencyMs  int64  `json:"latency_ms"`
		Body       string `json:"body"`
		Error      string `json:"error"`
	}
	if err := c.call(r, true, "POST", "/webhooks/test", map[string]string{"id": h.ID, "event": r.PostFormValue("event")}, &res); err != nil {
		c.webhookPage(w, r, statusOf(err), page{Error: c.errorText(r, err)})
		return
	}
	p := page{Notice: fmt.Sprintf("Test %s event: the receiver answered %d in %d ms.", res.Event, res.StatusCode, res.LatencyMs)}
	if res.Error != "" {
		p = page{Error: fmt.Sprintf("Test %s event: %s", res.Event, res.Error)}
	}
	p.Data = map[string]any{"TestBody": res.Body}
	c.webhookPage(w, r, http.StatusOK, p)
}

func (c *Console) redeliver(w http.ResponseWriter, r *http.Request) {
	id := pathValue(r, "id")
	var attempts api.List[storage.Attempt]
	err := c.call(r, true, "GET", "/webhooks/attempts?limit=1&delivery="+url.QueryEscape(id), nil, &attempts)
	if err == nil && len(attempts.Data) == 0 {
		err = &apiError{Status: http.StatusNotFound, Message: "No delivery " + id + "."}
	}
	var h webhookInfo
	if err == nil {
		// The delivery must be of a webhook the session may see.
		h, err = c.findWebhook(r, attempts.Data[0].WebhookID)
	}
	if err == nil {
		err = c.call(r, true, "POST", "/webhooks/redeliver", map[string]string{"id": id}, nil)
	}
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	http.Redirect(w, r, "/dashboard/webhooks/"+h.ID+"?redelivered="+id, http.StatusSeeOther)
}

func (c *Console) sandbox(w http.ResponseWriter, r *http.Request) {
	c.sandboxPage(w, r, http.StatusOK, page{})
}

func (c *Console) sandboxPage(w http.ResponseWriter, r *http.Request, status int, p page) {
	p.Title = "Sandbox"
	if currentSession(r.Context()).Owner == "" {
		// The operator sees every owner's sandbox, as `blueline sandbox`.
		var all api.SandboxInfo
		if err := c.call(r, true, "GET", "/sandbox", nil, &all); err != nil {
			if statusOf(err) != http.StatusNotFound {
				c.fail(w, r, nil, err)
				return
			}
			p.Error = c.errorText(r, err)
		}
		p.Data = map[string]any{"All": all}
		c.render(w, r, status, "sandbox", nil, p)
		return
	}
	var own map[string]any
	if err := c.call(r, false, "GET", "/v1/sandbox", nil, &own); err != nil {
		p.Error = c.errorText(r, err)
		status = statusOf(err)
	}
	p.Data = map[string]any{"Own": own}
	c.render(w, r, status, "sandbox", nil, p)
}

func (c *Console) startSandbox(w http.ResponseWriter, r *http.Request) {
	s := currentSession(r.Context())
	var err error
	if s.Owner == "" {
		err = c.call(r, true, "POST", "/sandbox", map[string]string{"owner": r.PostFormValue("owner")}, nil)
	} else {
		err = c.call(r, false, "POST", "/v1/sandbox", map[string]any{}, nil)
	}
	if err != nil {
		c.sandboxPage(w, r, statusOf(err), page{Error: c.errorText(r, err)})
		return
	}
	http.Redirect(w, r, "/dashboard/sandbox", http.StatusSeeOther)
}

// simLines are the lines on the simulated network.
func (c *Console) simLines() []storage.Line {
	var out []storage.Line
	for _, l := range c.opts.DB.Lines() {
		if l.Bridge == "sim" {
			out = append(out, l)
		}
	}
	return out
}

// The simulator plays contacts, on any chat of any line: the operator's
// only, not an owner's.
func (c *Console) simulator(w http.ResponseWriter, r *http.Request) {
	c.simulatorPage(w, r, http.StatusOK, page{})
}

func (c *Console) simulatorPage(w http.ResponseWriter, r *http.Request, status int, p page) {
	p.Title = "Simulator"
	if currentSession(r.Context()).Owner != "" {
		status, p.Error = http.StatusForbidden, "The simulator plays contacts on every chat: only the host's operator may use it."
	}
	p.fill(map[string]any{"Lines": c.simLines(), "Types": append(slices.Clone(bridge.ReactionTypes), "emoji", "sticker")})
	c.render(w, r, status, "simulator", nil, p)
}

func (c *Console) simulate(w http.ResponseWriter, r *http.Request) {
	if currentSession(r.Context()).Owner != "" {
		c.simulatorPage(w, r, http.StatusForbidden, page{})
		return
	}
	f := r.PostForm
	var body map[string]any
	what := pathValue(r, "what")
	switch what {
	case "inbound":
		body = map[string]any{"line": f.Get("line"), "from": f.Get("from"), "text": f.Get("text")}
	case "reaction":
		body = map[string]any{"line": f.Get("line"), "from": f.Get("from"), "message": f.Get("message"), "type": f.Get("type"),
			"emoji": f.Get("emoji"), "remove": f.Get("remove") != ""}
	case "typing":
		body = map[string]any{"line": f.Get("line"), "from": f.Get("from"), "state": f.Get("state")}
	default:
		c.simulatorPage(w, r, http.StatusNotFound, page{Error: "No simulator action " + what + "."})
		return
	}
	var out map[string]any
	if err := c.call(r, true, "POST", "/sim/"+what, body, &out); err != nil {
		c.simulatorPage(w, r, statusOf(err), page{Error: c.errorText(r, err)})
		return
	}
	notice := "Done."
	switch what {
	case "inbound":
		notice = fmt.Sprintf("%s texted %s: message %v.", f.Get("from"), f.Get("line"), out["id"])
	case "reaction":
		notice = fmt.Sprintf("%s reacted %s.", f.Get("from"), f.Get("type"))
	case "typing":
		notice = fmt.Sprintf("%s is typing: %s.", f.Get("from"), f.Get("state"))
	}
	p := page{Notice: notice, Data: map[string]any{"Result": out}}
	if id, _ := out["chat_id"].(string); id != "" {
		p.Data.(map[string]any)["ChatID"] = id
	}
	c.simulatorPage(w, r, http.StatusOK, p)
}
