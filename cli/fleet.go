package cli

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/client/api"
)

func (a *app) fleetCommand() *cobra.Command {
	c := &cobra.Command{
		Use:     "fleet",
		Short:   "The fleet of hosts this daemon is a node of ([fleet])",
		Example: "  blueline fleet status\n  blueline fleet status --json",
		Args:    noArgs,
	}
	c.AddCommand(a.fleetStatusCommand())
	return c
}

func (a *app) fleetStatusCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status [--json]",
		Short: "Show the fleet's nodes, where each line is, and JetStream's health",
		Long: `Ask the daemon on this host how it sees its fleet: each node (up, version,
lines, last heartbeat), each line and the node serving it, the events stream
and the control plane's buckets (messages, replicas, leader, replicas up to
date), and each webhook's consumer (events not yet delivered). --json prints
it as JSON.`,
		Example: "  blueline fleet status\n  blueline fleet status --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			var st api.FleetStatus
			if err := a.adminDo(cmd.Context(), http.MethodGet, "/fleet", nil, &st); err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.stdout, st)
			}
			return printFleetStatus(a.stdout, st, time.Now())
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print as JSON")
	return c
}

func printFleetStatus(w io.Writer, st api.FleetStatus, now time.Time) error {
	fmt.Fprintf(w, "fleet, as node %s sees it\n\nnodes\n", printable(st.Node))
	var rows [][]string
	for _, n := range st.Nodes {
		state := "up"
		if !n.Up {
			state = "DOWN"
		}
		rows = append(rows, []string{n.Node, state, n.Version, strings.Join(n.Lines, ","), ago(now, n.LastSeen)})
	}
	if err := writeAligned(w, []string{"NODE", "STATE", "VERSION", "LINES", "LAST SEEN"}, printableRows(rows)); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nlines")
	rows = nil
	for _, l := range st.Lines {
		state := l.Health
		if !l.Up {
			state = "unavailable (node down)"
		}
		rows = append(rows, []string{l.Handle, l.Node, state})
	}
	if err := writeAligned(w, []string{"LINE", "NODE", "STATE"}, printableRows(rows)); err != nil {
		return err
	}
	fmt.Fprintln(w, "\njetstream")
	rows = [][]string{asset("stream "+st.Stream.Name, st.Stream)}
	for _, b := range st.Buckets {
		rows = append(rows, asset("bucket "+b.Name, b))
	}
	if err := writeAligned(w, []string{"ASSET", "MESSAGES", "REPLICAS", "CURRENT", "LEADER"}, printableRows(rows)); err != nil {
		return err
	}
	fmt.Fprintln(w, "\nwebhook consumers")
	rows = nil
	for _, c := range st.Consumers {
		rows = append(rows, []string{c.Name, strconv.FormatUint(c.Pending, 10), strconv.Itoa(c.AckPending), strconv.Itoa(c.Redelivered)})
	}
	return writeAligned(w, []string{"CONSUMER", "BACKLOG", "IN FLIGHT", "REDELIVERED"}, printableRows(rows))
}

func asset(name string, a api.FleetAsset) []string {
	leader := a.Leader
	if leader == "" {
		leader = "-"
	}
	return []string{name, strconv.FormatUint(a.Messages, 10), strconv.Itoa(a.Replicas), strconv.Itoa(a.Current), leader}
}

// ago words how long before now the Unix-ms time at was.
func ago(now time.Time, at int64) string {
	if at == 0 {
		return "never"
	}
	return now.Sub(time.UnixMilli(at)).Round(time.Second).String() + " ago"
}

func printableRows(rows [][]string) [][]string {
	for _, r := range rows {
		for j, cell := range r {
			r[j] = printable(cell)
		}
	}
	return rows
}
