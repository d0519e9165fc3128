package daemon

import (
	"time"

	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/server"
	"github.com/blueline-app/blueline/storage"
)

// guardSet is each line's Apple ID guard, by line ID.
type guardSet map[string]server.GuardPolicy

// guardPolicies gives each line the [guard] policy, on where the line's
// guard setting (or its bridge's default) says so. The sandbox line, on
// the simulated network, has it off.
func guardPolicies(cfg *config.Config, lines []storage.Line) guardSet {
	g := cfg.Guard
	base := server.GuardPolicy{Pace: g.Pace.Duration, MaxUnanswered: g.MaxUnanswered, MaxRatio: g.MaxRatio,
		MaxColdContacts: g.MaxColdContacts, ColdAfter: g.ColdAfter.Duration, MaxAvailabilityLookups: g.MaxAvailabilityLookups}
	set := guardSet{}
	for _, l := range lines {
		p := base
		for _, c := range cfg.Lines {
			if c.Handle == l.Handle && !l.IsSandbox {
				p.Enabled = c.GuardOn()
			}
		}
		set[l.ID] = p
	}
	return set
}

// policy is a line's guard (server.Options.Guard); a line the daemon does
// not serve has none.
func (s guardSet) policy(l storage.Line) server.GuardPolicy { return s[l.ID] }

// pace is the delivery worker's pace of the guarded lines.
func (s guardSet) pace() map[string]time.Duration {
	out := map[string]time.Duration{}
	for id, p := range s {
		if p.Enabled && p.Pace > 0 {
			out[id] = p.Pace
		}
	}
	return out
}
