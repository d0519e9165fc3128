package e2e

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/blueline-app/blueline/testkit"
)

// The daemon ends each event stream after [limits] stream_lifetime;
// `blueline listen` follows it again by itself, from where it was: every
// event forwarded once, in order, and no word of a break.
func TestListenOutlivesStreamLifetime(t *testing.T) {
	td := startTestDaemon(t, "[limits]\nstream_lifetime = \"1s\"\n")
	// A proxy in front of the API counts the streams listen opens.
	target, _ := url.Parse(td.base)
	var streams atomic.Int32
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) }, FlushInterval: -1}
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/events" {
			streams.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	local := localReceiver(t, nil)
	t.Setenv("BLUELINE_API_KEY", td.key())
	l := td.startCLI(t, "listen", "-f", local.Server.URL, "--base-url", front.URL)
	local.SetSecret(l.secret())
	var want []string
	for i := range 3 {
		// Each on a later stream than the one before: the texts
		// straddle the streams' ends.
		n := streams.Load()
		testkit.Eventually(t, 10*time.Second, func() bool { return streams.Load() > n })
		text := "message " + strconv.Itoa(i)
		td.inbound(mainLine, alice, text)
		want = append(want, text)
	}
	got := waitHooks(t, local, len(want))
	var texts []string
	for _, h := range got {
		texts = append(texts, h.Data()["text"].(string))
	}
	if !slices.Equal(texts, want) {
		t.Errorf("forwarded %q, want %q", texts, want)
	}
	if strings.Contains(l.stderr.String(), "broke") {
		t.Errorf("listen reported a break: %s", l.stderr.String())
	}
}
