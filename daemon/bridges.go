package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"slices"
	"time"

	"github.com/blueline-app/blueline/bridge"
	"github.com/blueline-app/blueline/bridge/messages"
	"github.com/blueline-app/blueline/bridge/sim"
	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/config"
	"github.com/blueline-app/blueline/keyword"
	"github.com/blueline-app/blueline/metrics"
	"github.com/blueline-app/blueline/storage"
)

// configuredLines turns the configuration's lines into the lines to serve.
func configuredLines(cfg *config.Config) []storage.Line {
	var lines []storage.Line
	if cfg.Sandbox.Handle != "" {
		lines = append(lines, storage.Line{Handle: cfg.Sandbox.Handle, Label: cfg.Sandbox.Label, Service: "imessage",
			Bridge: "sim", AdvancedFeatures: cfg.Sandbox.Advanced(), IsSandbox: true, ApprovalTTL: config.DefaultApprovalTTL.Milliseconds(),
			OptOutWords: keyword.FoldAll(keyword.DefaultOptOut), OptInWords: keyword.FoldAll(keyword.DefaultOptIn)})
	}
	for _, l := range cfg.Lines {
		lines = append(lines, storage.Line{Handle: l.Handle, Label: l.Label, Service: l.Service, Bridge: l.Bridge,
			AdvancedFeatures: l.AdvancedFeatures, OptOutWords: keyword.FoldAll(l.OptOutWords), OptInWords: keyword.FoldAll(l.OptInWords),
			OptOutReply: l.OptOutReply, TakeoverQuiet: l.TakeoverQuiet.Milliseconds(), SelfHandles: l.SelfHandles,
			ApprovalRequired: l.Approval == config.ApprovalRequired, ApprovalExcept: l.ApprovalExcept, ApprovalTTL: l.ApprovalTTL.Milliseconds(), TakeoverHold: l.Takeover == config.TakeoverHold})
	}
	return lines
}

// openBridges gives each line its bridge: the simulated network, or the
// Messages app of this Mac.
func openBridges(ctx context.Context, cfg *config.Config, db *storage.DB, lines []storage.Line, network *sim.Network, log *slog.Logger) (map[string]bridge.Bridge, error) {
	bridges := map[string]bridge.Bridge{}
	for _, l := range lines {
		if l.Bridge != "messages" {
			bridges[l.ID] = network
			continue
		}
		i := slices.IndexFunc(cfg.Lines, func(c config.Line) bool { return c.Handle == l.Handle })
		lc := cfg.Lines[i]
		// Elsewhere than on a Mac, only stand-ins for the Messages database
		// and osascript (the tests') can make the bridge work.
		if runtime.GOOS != "darwin" && lc.ChatDB == config.DefaultChatDB && lc.Osascript == config.DefaultOsascript {
			closeBridges(bridges)
			return nil, fmt.Errorf("line %s: bridge = \"messages\": the messages bridge needs macOS (it drives the Messages app of a Mac), and this is %s; "+
				"run this line's daemon on a Mac, or use bridge = \"sim\" to try Blueline here", l.Handle, runtime.GOOS)
		}
		mb, err := messages.Open(ctx, messages.Config{
			Line: l.Handle, SelfHandles: l.SelfHandles, Service: l.Service, ChatDB: lc.ChatDB, Osascript: lc.Osascript,
			AttachmentsDir: lc.AttachmentsDir, HelperPort: lc.HelperPort, PollOnly: !*lc.Watch, SMSFallback: lc.SMSFallback,
			TextTimeout: lc.SendTimeout.Duration, FileTimeout: lc.FileSendTimeout.Duration, Poll: lc.Poll.Duration,
			TransferWait: lc.TransferWait.Duration, HoldUnknownSenders: lc.UnknownSenders == "hold", PingEvery: pingEvery(lc), MacOSVersion: lc.MacOSVersion, Cursor: lineCursor{db, l.ID}, Log: log,
		})
		if err != nil {
			closeBridges(bridges)
			return nil, err
		}
		bridges[l.ID] = mb
	}
	return bridges, nil
}

// closeBridges releases what bridges hold open (the Messages database, the
// helper's listener).
func closeBridges(bridges map[string]bridge.Bridge) {
	for _, b := range distinct(bridges) {
		if c, ok := b.(io.Closer); ok {
			c.Close()
		}
	}
}

// advanced reports whether a line's advanced features work now: a Messages
// line's only while its private-API helper is connected.
func advanced(bridges map[string]bridge.Bridge) func(storage.Line) bool {
	return func(l storage.Line) bool {
		if a, ok := bridges[l.ID].(interface{ Advanced() bool }); ok {
			return a.Advanced()
		}
		return l.AdvancedFeatures
	}
}

// capabilities reports why each feature of a line cannot be used now, as
// its bridge says (a Messages line's: its helper, chat.db); nil for a
// bridge that does not say, whose line's features follow advanced.
func capabilities(bridges map[string]bridge.Bridge) func(storage.Line) map[string]string {
	return func(l storage.Line) map[string]string {
		if c, ok := bridges[l.ID].(interface{ Capabilities() map[string]string }); ok {
			return c.Capabilities()
		}
		return nil
	}
}

// pingEvery is the watchdog's interval of a Messages line, negative when
// it is off.
func pingEvery(lc config.Line) time.Duration {
	if !*lc.Watchdog {
		return -1
	}
	return lc.PingEvery.Duration
}

// lineHealth is what a Messages line's bridge has seen, for GET /v1/lines.
func lineHealth(bridges map[string]bridge.Bridge) func(storage.Line) *api.LineHealth {
	return func(l storage.Line) *api.LineHealth {
		b, ok := bridges[l.ID].(healthReporter)
		if !ok {
			return nil
		}
		h := b.Health()
		out := &api.LineHealth{Summary: h.String(), HistoryRows: h.HistoryRows, TwinsSuppressed: h.Twins, ScreenedRows: h.Screened}
		if h.SendingAlias != "" {
			out.SendingAlias = &h.SendingAlias
		}
		if !h.ReplacedAt.IsZero() {
			at := h.ReplacedAt.UnixMilli()
			out.ChatDBReplacedAt = &at
		}
		return out
	}
}

// lineLatency is a line's latency over the last day, for GET /v1/lines.
func lineLatency(mtr *metrics.Metrics) func(storage.Line) api.LineLatency {
	return func(l storage.Line) api.LineLatency {
		d := mtr.LineLatency(l.ID)
		q := func(stage string) api.LatencyQuantiles {
			s := d.Stages[stage]
			out := api.LatencyQuantiles{Count: s.Count}
			if s.Count > 0 {
				p50, p99 := s.P50.Milliseconds(), s.P99.Milliseconds()
				out.P50Ms, out.P99Ms = &p50, &p99
			}
			return out
		}
		return api.LineLatency{Since: d.Since.UnixMilli(), AcceptToSent: q(metrics.AcceptToSent),
			RowToWebhook: q(metrics.RowToWebhook), SentToDelivered: q(metrics.SentToDelivered)}
	}
}

// availability asks a line's bridge whether a handle is reachable on
// iMessage.
func availability(bridges map[string]bridge.Bridge) func(context.Context, storage.Line, string) (bool, error) {
	type asker interface {
		Availability(ctx context.Context, line, handle string) (bool, error)
	}
	return func(ctx context.Context, l storage.Line, h string) (bool, error) {
		a, ok := bridges[l.ID].(asker)
		if !ok {
			return false, fmt.Errorf("line %s cannot check availability", l.Handle)
		}
		return a.Availability(ctx, l.Handle, h)
	}
}

// lineCursor keeps a Messages line's chat.db position in the database.
type lineCursor struct {
	db     *storage.DB
	lineID string
}

func (c lineCursor) Load(ctx context.Context) (int64, bool, error) {
	return c.db.BridgeCursor(ctx, c.lineID)
}
func (c lineCursor) Save(ctx context.Context, pos int64) error {
	return c.db.SetBridgeCursor(ctx, c.lineID, pos)
}

// distinct lists each bridge once, however many lines it serves.
func distinct(bridges map[string]bridge.Bridge) []bridge.Bridge {
	var out []bridge.Bridge
	for _, b := range bridges {
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// healthReporter is a bridge that tells what it has seen of its network
// (a Messages line's chat.db).
type healthReporter interface{ Health() messages.Health }

// lineCounts are what the metrics count of each line's chat.db.
func (d *Daemon) lineCounts() []metrics.LineCounts {
	var out []metrics.LineCounts
	for _, l := range d.lines {
		if b, ok := d.bridges[l.ID].(healthReporter); ok {
			h := b.Health()
			out = append(out, metrics.LineCounts{Line: l.Handle, HistoryRows: h.HistoryRows, Twins: h.Twins, Screened: h.Screened})
		}
	}
	return out
}
