package cli

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/blueline-app/blueline/adminsock"
)

// pingTimeout bounds status's question to the daemon.
const pingTimeout = 3 * time.Second

// statusReport is what status finds, as --json prints it.
type statusReport struct {
	Service       string `json:"service"`       // running (…), stopped (…), or why there is no service
	ServiceState  string `json:"service_state"` // running, stopped, failed, not installed, unavailable
	Config        string `json:"config"`        // "" for the embedded default
	ConfigSource  string `json:"config_source"` // --config, BLUELINE_CONFIG, the installed service, the embedded default
	DataDir       string `json:"data_dir,omitempty"`
	AdminSocket   string `json:"admin_socket,omitempty"`
	DaemonAnswers bool   `json:"daemon_answers"`
	DaemonError   string `json:"daemon_error,omitempty"`
}

func (a *app) statusCommand() *cobra.Command {
	var asJSON bool
	c := &cobra.Command{
		Use:   "status",
		Short: "Say whether the daemon answers, with which configuration, and the service's state",
		Long: `Print the system service's state (running (…), stopped, failed or not
installed), the configuration used and where it came from (--config,
BLUELINE_CONFIG, the installed service, or the embedded default), and whether
the daemon of that configuration answers on its admin socket. Exits 0 when
it answers, 1 otherwise.`,
		Example: "  blueline status\n  blueline status --config ./blueline.toml\n  blueline status --json",
		Args:    noArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := a.status(cmd.Context())
			if asJSON {
				if jerr := printJSON(a.stdout, r); jerr != nil {
					return jerr
				}
			} else {
				fmt.Fprintln(a.stdout, r.Service)
				if r.Config == "" {
					fmt.Fprintf(a.stdout, "configuration: %s\n", r.ConfigSource)
				} else {
					fmt.Fprintf(a.stdout, "configuration: %s (from %s)\n", r.Config, r.ConfigSource)
				}
				if r.DaemonAnswers {
					fmt.Fprintf(a.stdout, "daemon: answers on %s\n", r.AdminSocket)
				} else if r.AdminSocket != "" {
					fmt.Fprintf(a.stdout, "daemon: does not answer on %s\n", r.AdminSocket)
				}
			}
			return err
		},
	}
	c.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	return c
}

// status finds the service's state, the configuration and whether its
// daemon answers. The error says what is wrong when it does not.
func (a *app) status(ctx context.Context) (statusReport, error) {
	var r statusReport
	r.Config, r.ConfigSource = a.configPath()
	r.Service, r.ServiceState = serviceState(ctx)
	cfg, err := a.config()
	if err != nil {
		return r, err
	}
	r.DataDir = cfg.DataDir()
	r.AdminSocket = adminsock.Path(r.DataDir)
	pctx, cancel := context.WithTimeout(ctx, pingTimeout)
	defer cancel()
	// The cheapest admin read there is (no ping route: server/ is not ours
	// to change here).
	if err := adminsock.NewClient(r.DataDir).Do(pctx, http.MethodGet, "/keys", nil, nil); err != nil {
		r.DaemonError = err.Error()
		return r, fmt.Errorf("%v (service: %s)", err, r.Service)
	}
	r.DaemonAnswers = true
	return r, nil
}

// serviceState is the system service's state for people, and in one word.
func serviceState(ctx context.Context) (line, state string) {
	var out bytes.Buffer
	s, err := serviceSetupHere("status", io.Discard)
	if err != nil {
		return err.Error(), "unavailable"
	}
	s.out = &out
	if err := s.control(ctx, "status"); err != nil {
		line = err.Error()
	} else {
		line = strings.TrimSpace(out.String())
	}
	for _, st := range []string{stateRunning, stateStopped, stateFailed, stateNotInstalled} {
		if strings.HasPrefix(line, st) {
			return line, st
		}
	}
	// control says "the service is not installed: …" when it is not.
	if strings.Contains(line, "not installed") {
		return line, stateNotInstalled
	}
	return line, "unavailable"
}
