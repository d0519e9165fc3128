package mcpserver

import (
	"context"
	"fmt"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/blueline-app/blueline/doctor"
	"github.com/blueline-app/blueline/handle"
)

type (
	DiagnoseInput struct {
		Line string `json:"line,omitempty" jsonschema:"the line: its handle or ln_ ID; omitted checks every line of the key"`
	}
	DiagnoseOutput struct {
		OK     bool           `json:"ok" jsonschema:"true when no check failed (a warning or a skipped check does not fail)"`
		Checks []doctor.Check `json:"checks" jsonschema:"per line, blueline doctor's checks of what the daemon answers: helper, daemon"`
		// NotChecked are doctor's checks of the Mac itself, which only
		// the host can make.
		NotChecked []string `json:"not_checked" jsonschema:"blueline doctor's checks of the Mac itself, which only the host can make: run blueline doctor there"`
	}
)

func (t *tools) addDiagnose(s *mcp.Server) {
	mcp.AddTool(s, &mcp.Tool{Name: "diagnose", Annotations: readOnly(),
		Description: "Check why a line may not work: blueline doctor's checks that the running daemon can answer, per line " +
			"(daemon: the line's health — chat.db readable, Automation allowed, Messages answering; helper: the private-API helper and what the line can do), " +
			"each ok, warn, skip or fail with the fix. The checks of the Mac itself (not_checked) need blueline doctor on the Mac. " +
			"Fixes are for the line's owner: tell them, do not try them."}, t.diagnose)
}

func (t *tools) diagnose(ctx context.Context, req *mcp.CallToolRequest, in DiagnoseInput) (*mcp.CallToolResult, DiagnoseOutput, error) {
	c, err := t.client(req.Extra)
	if err != nil {
		return nil, DiagnoseOutput{}, err
	}
	lines, err := c.Lines.List(ctx)
	if err != nil {
		return nil, DiagnoseOutput{}, apiError(err)
	}
	out := DiagnoseOutput{OK: true, Checks: []doctor.Check{}, NotChecked: doctor.HostChecks}
	want, _ := handle.Normalize(in.Line)
	found := false
	for _, l := range lines {
		if in.Line != "" && l.ID != in.Line && l.Handle != want {
			continue
		}
		found = true
		if l.Health == nil {
			const why = "not a Messages line: no Mac to check"
			out.Checks = append(out.Checks, doctor.Check{Name: doctor.Helper, Line: l.Handle, Status: doctor.Skip, Detail: why},
				doctor.Check{Name: doctor.Daemon, Line: l.Handle, Status: doctor.Skip, Detail: why})
			continue
		}
		out.Checks = append(out.Checks, doctor.HelperCheck(&l, 0), doctor.DaemonCheck(&l))
	}
	if in.Line != "" && !found {
		return nil, DiagnoseOutput{}, fmt.Errorf("line %s is not one this key may use (list_lines shows those)", in.Line)
	}
	for _, ch := range out.Checks {
		if ch.Status == doctor.Fail {
			out.OK = false
		}
	}
	return nil, out, nil
}
