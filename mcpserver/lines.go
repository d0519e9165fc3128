package mcpserver

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/client/api"
)

// linesURI is the resource of the lines a key may use and what it may do
// on each, so that an agent knows before it tries.
const linesURI = "blueline://lines"

// linesPrompt is the prompt that says the same in words.
const linesPrompt = "lines"

// LineUse is a line as the lines resource shows it: what an agent may do on
// it now, from the line's capabilities (GET /v1/lines).
type LineUse struct {
	Handle    string  `json:"handle"`
	ID        string  `json:"id"`
	Label     *string `json:"label"`
	Service   string  `json:"service"`
	IsActive  bool    `json:"is_active"`
	IsSandbox bool    `json:"is_sandbox"`
	// Tools are the tools that work on the line now.
	Tools []string `json:"tools"`
	// Available are the features it has now (reactions, emoji_reactions,
	// typing, receipts, edit, unsend, groups, …); Unavailable, those it
	// has not, each with why.
	Available   []string          `json:"available"`
	Unavailable map[string]string `json:"unavailable"`
	// Guard is the line's Apple ID guard and its standing today, as GET
	// /v1/lines shows it; GuardStanding says it in words.
	Guard         api.LineGuard `json:"guard"`
	GuardStanding string        `json:"guard_standing"`
}

// LinesGuide is the lines resource.
type LinesGuide struct {
	Lines []LineUse `json:"lines"`
	// Rules are the rules every tool is held to.
	Rules string `json:"rules"`
}

// lineTools are the tools of a line whatever it can do, and those that
// need a feature.
var (
	lineTools    = []string{"list_chats", "read_messages", "send_message", "wait_for_message", "chats_needing_reply", "search_messages"}
	featureTools = []struct{ tool, feature string }{{"react", "reactions"}, {"set_typing", "typing"}, {"mark_read", "receipts"},
		{"edit_message", "edit"}, {"unsend_message", "unsend"}, {"create_group", "groups"}, {"rename_group", "groups"},
		{"add_group_participant", "groups"}, {"remove_group_participant", "groups"}, {"leave_group", "groups"},
		{"check_availability", "availability"}}
)

func (t *tools) addLines(s *mcp.Server) {
	s.AddResource(&mcp.Resource{URI: linesURI, Name: "lines", Title: "Lines and what they can do", MIMEType: "application/json",
		Description: "The lines this key may use, and for each the tools that work on it now and the features it has (or has not, and why)."},
		t.readLines)
	s.AddPrompt(&mcp.Prompt{Name: linesPrompt, Title: "My Blueline lines",
		Description: "Which lines you may use, what you may do on each (send, tapbacks, emoji tapbacks, typing, read receipts, …) and the rules."},
		t.linesPrompt)
}

// guide reads the lines the request's key may use.
func (t *tools) guide(ctx context.Context, extra *mcp.RequestExtra) (LinesGuide, error) {
	c, err := t.client(extra)
	if err != nil {
		return LinesGuide{}, err
	}
	lines, err := c.Lines.List(ctx)
	if err != nil {
		return LinesGuide{}, apiError(err)
	}
	g := LinesGuide{Lines: make([]LineUse, len(lines)), Rules: rules(t.opts)}
	for i, l := range lines {
		u := LineUse{Handle: l.Handle, ID: l.ID, Label: l.Label, Service: l.Service, IsActive: l.IsActive, IsSandbox: l.IsSandbox,
			Tools: slices.Clone(lineTools), Available: []string{}, Unavailable: map[string]string{},
			Guard: l.Guard, GuardStanding: guardStanding(l.Guard)}
		for _, name := range slices.Sorted(maps.Keys(l.Capabilities)) {
			cp := l.Capabilities[name]
			switch {
			case cp.Available:
				u.Available = append(u.Available, name)
			case cp.Reason != nil:
				u.Unavailable[name] = *cp.Reason
			default:
				u.Unavailable[name] = "not available"
			}
		}
		for _, ft := range featureTools {
			if slices.Contains(u.Available, ft.feature) {
				u.Tools = append(u.Tools, ft.tool)
			}
		}
		if !l.IsSandbox {
			u.Tools = append(u.Tools, blockedTools...)
		}
		g.Lines[i] = u
	}
	return g, nil
}

func (t *tools) readLines(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	g, err := t.guide(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	data, err := json.MarshalIndent(g, "", "  ")
	if err != nil {
		return nil, err
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: linesURI, MIMEType: "application/json", Text: string(data)}}}, nil
}

func (t *tools) linesPrompt(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
	g, err := t.guide(ctx, req.Extra)
	if err != nil {
		return nil, err
	}
	return &mcp.GetPromptResult{Description: "The Blueline lines you may use",
		Messages: []*mcp.PromptMessage{{Role: "user", Content: &mcp.TextContent{Text: g.text()}}}}, nil
}

// text says the guide in words, for a model.
func (g LinesGuide) text() string {
	var b strings.Builder
	if len(g.Lines) == 0 {
		b.WriteString("This key may use no Blueline line.\n")
	} else {
		b.WriteString("You may use these Blueline lines (pass the handle as line to the tools):\n")
	}
	for _, l := range g.Lines {
		fmt.Fprintf(&b, "\n- %s", l.Handle)
		if l.Label != nil && *l.Label != "" {
			fmt.Fprintf(&b, " (%s)", *l.Label)
		}
		fmt.Fprintf(&b, ", %s", l.Service)
		if l.IsSandbox {
			b.WriteString(", the sandbox line: it may message only its owner's paired phone")
		}
		if !l.IsActive {
			b.WriteString(", not active")
		}
		fmt.Fprintf(&b, ".\n  Tools: %s.\n", strings.Join(l.Tools, ", "))
		if slices.Contains(l.Available, "emoji_reactions") {
			b.WriteString("  Emoji tapbacks: yes (react with emoji).\n")
		}
		if len(l.Available) > 0 {
			fmt.Fprintf(&b, "  Can: %s.\n", strings.Join(l.Available, ", "))
		}
		for _, name := range slices.Sorted(maps.Keys(l.Unavailable)) {
			fmt.Fprintf(&b, "  Cannot %s: %s.\n", name, l.Unavailable[name])
		}
		fmt.Fprintf(&b, "  Apple ID guard: %s.\n", l.GuardStanding)
	}
	fmt.Fprintf(&b, "\nThe key's scopes apply too: a tool it lacks a scope for answers insufficient_scope.\n\n%s\n", g.Rules)
	return b.String()
}

// guardStanding says a line's guard and how much of today's caps is left,
// so that an agent paces itself before a send is refused.
func guardStanding(g api.LineGuard) string {
	if !g.Enabled {
		return "off (no pace or caps on this line)"
	}
	parts := []string{fmt.Sprintf("on: one message every %s", time.Duration(g.PaceMS)*time.Millisecond)}
	if g.Limits.MaxRatio > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d messages sent today (%d per message received, %d received)",
			g.Today.Sent, g.SentAllowed(), g.Limits.MaxRatio, g.Today.Received))
	}
	if g.Limits.MaxColdContacts > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d cold contacts messaged today", g.Today.ColdContacts, g.Limits.MaxColdContacts))
	}
	if g.Limits.MaxUnanswered > 0 {
		parts = append(parts, fmt.Sprintf("at most %d messages to a chat until its contact answers", g.Limits.MaxUnanswered))
	}
	parts = append(parts, "the day's counts reset at "+time.UnixMilli(g.Today.ResetsAt).UTC().Format(time.RFC3339))
	return strings.Join(parts, "; ")
}
