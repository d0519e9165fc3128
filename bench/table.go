package main

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// row is one line of the summary table.
type row struct {
	Benchmark string // entry name, then the result's name when it differs
	Measures  string
	Figures   string
	Command   string
}

// rowsFor turns an entry's results into table rows; a failed run with no
// result still gets a row, so a missing figure is never silent.
func rowsFor(e entry, command string, rs []result, runErr error) []row {
	if len(rs) == 0 {
		fig := "—"
		if runErr != nil {
			fig = "FAILED: " + oneLine(runErr.Error())
		}
		return []row{{e.Name, e.Measures, fig, command}}
	}
	rows := make([]row, 0, len(rs))
	for i, r := range rs {
		fig := figures(r.Metrics, e.Metrics)
		if r.Err != "" {
			fig = strings.TrimPrefix(fig+"; ", "—; ") + "FAILED: " + oneLine(r.Err)
		}
		// The entry's description once, on its first row: the rows below
		// are its parts.
		measures := e.Measures
		if i > 0 {
			measures = ""
		}
		rows = append(rows, row{e.Name + " " + r.Name, measures, fig, command})
	}
	return rows
}

// figures writes the metrics the entry wants, in its order ("32 new-p50-ms,
// 41 new-p99-ms"); when a result reported none of them, all it reported,
// so that a renamed metric still shows up.
func figures(ms []metric, want []string) string {
	var parts []string
	for _, unit := range want {
		for _, m := range ms {
			if m.Unit == unit {
				parts = append(parts, formatValue(m.Value)+" "+m.Unit)
			}
		}
	}
	if len(parts) == 0 {
		for _, m := range ms {
			// ns/op of 0 is what the e2e benchmarks report to hide it.
			if m.Unit == "ns/op" && m.Value == 0 {
				continue
			}
			parts = append(parts, formatValue(m.Value)+" "+m.Unit)
		}
	}
	if len(parts) == 0 {
		return "—"
	}
	return strings.Join(parts, ", ")
}

// formatValue keeps three significant digits below 1,000 and whole numbers
// with separators above: the figures vary by more than that between runs.
func formatValue(v float64) string {
	switch {
	case math.IsNaN(v) || math.IsInf(v, 0):
		return strconv.FormatFloat(v, 'g', -1, 64)
	case math.Abs(v) >= 999.5:
		return thousands(int(math.Round(v)))
	case v == math.Trunc(v):
		return strconv.Itoa(int(v))
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

// printTable writes the rows as one markdown table, the format of
// README.md's "Benchmarks" section.
func printTable(w io.Writer, rows []row) {
	fmt.Fprintln(w, "| benchmark | what it measures | figures | command |")
	fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range rows {
		fmt.Fprintf(w, "| %s | %s | %s | `%s` |\n", cell(r.Benchmark), cell(r.Measures), cell(r.Figures), strings.ReplaceAll(r.Command, "|", `\|`))
	}
}

// cell escapes what would end a markdown table cell.
func cell(s string) string {
	return strings.ReplaceAll(oneLine(s), "|", `\|`)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
