package daemontest_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/blueline-app/blueline/client/api"
	"github.com/blueline-app/blueline/daemontest"
	"github.com/blueline-app/blueline/testkit"
)

// Three nodes start as one fleet, each serving its own line.
func TestFleet(t *testing.T) {
	nodes := daemontest.Fleet(t, 3, "")
	for i, td := range nodes {
		key := td.Key(api.KeyRequest{})
		var lines api.List[api.Line]
		r := apiGet(t, td.URL()+"/v1/lines", key, &lines)
		if r != 200 {
			t.Fatalf("%s: GET /v1/lines: %d", daemontest.FleetNode(i), r)
		}
		found := false
		for _, l := range lines.Data {
			found = found || l.Handle == daemontest.FleetLine(i)
		}
		if !found {
			t.Errorf("%s does not list its line %s: %+v", daemontest.FleetNode(i), daemontest.FleetLine(i), lines.Data)
		}
	}
	// Each node sees the whole fleet: three nodes up, three lines, the
	// stream and buckets on three replicas.
	var st api.FleetStatus
	testkit.Eventually(t, 10*time.Second, func() bool {
		st = api.FleetStatus{}
		if err := nodes[1].Admin().Do(context.Background(), "GET", "/fleet", nil, &st); err != nil {
			t.Fatal(err)
		}
		up := 0
		for _, n := range st.Nodes {
			if n.Up {
				up++
			}
		}
		return up == 3 && len(st.Lines) == 4 // node 0 has the sandbox line too
	})
	if st.Node != "mac-b" || st.Stream.Replicas != 3 || len(st.Buckets) != 6 || st.Stream.Leader == "" {
		t.Errorf("fleet status: %+v", st)
	}
	nodes[2].Stop()
	nodes[2].Start()
	if err := nodes[2].Admin().Do(context.Background(), "GET", "/keys", nil, nil); err != nil {
		t.Fatalf("mac-c after its restart: %v", err)
	}
}

// apiGet GETs url with key and decodes a 200's body into out; it returns
// the status.
func apiGet(t *testing.T, url, key string, out any) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == 200 {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	return resp.StatusCode
}
