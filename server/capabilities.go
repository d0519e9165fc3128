package server

import (
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/httpapi"
	"github.com/blueline-app/blueline/storage"
)

// Features are what GET /v1/lines reports in each line's capabilities: all
// but sending text and files, which every line does.
var Features = []string{"reactions", "emoji_reactions", "typing", "receipts", "edit", "unsend", "groups", "availability", "audio_messages",
	"threaded_replies"}

// capabilities says what a line can do now, and for each thing it cannot,
// why. The line's bridge knows best (a Messages line: its helper, chat.db);
// without its word, a line's advanced features are as Advanced reports.
// Some things no network offers: edits, unsends and emoji tapbacks on an
// SMS line, groups on the sandbox line (it sends to its paired phone only).
func (s *Server) capabilities(l storage.Line) map[string]api.Capability {
	var reasons map[string]string
	if s.opts.Capabilities != nil {
		reasons = s.opts.Capabilities(l)
	}
	if reasons == nil {
		reasons = map[string]string{}
		if !s.opts.Advanced(l) {
			for _, f := range Features {
				reasons[f] = "advanced features are off for this line (advanced_features in its configuration)"
			}
		}
	}
	if l.Service == "sms" {
		for _, f := range []string{"edit", "unsend", "emoji_reactions"} {
			reasons[f] = "not on an SMS line"
		}
	}
	if l.IsSandbox {
		reasons["groups"] = "the sandbox line sends to its paired phone only"
	}
	out := make(map[string]api.Capability, len(Features))
	for _, f := range Features {
		out[f] = api.Capability{Available: reasons[f] == "", Reason: nonEmpty(reasons[f])}
	}
	return out
}

// capable is the error of a write that needs a feature the line cannot use
// now: 400 advanced_features_required, with the reason.
func (s *Server) capable(l storage.Line, feature string) error {
	c := s.capabilities(l)[feature]
	if c.Available {
		return nil
	}
	return httpapi.InvalidRequest("advanced_features_required", "from", "Line %s cannot use %s now: %s.", l.Handle, featureNames[feature], *c.Reason)
}

var featureNames = map[string]string{
	"reactions": "reactions", "emoji_reactions": "emoji tapbacks", "typing": "typing indicators", "receipts": "read receipts",
	"edit": "edits", "unsend": "unsends", "groups": "group chats", "availability": "availability checks",
	"audio_messages": "audio messages", "threaded_replies": "threaded replies",
}
