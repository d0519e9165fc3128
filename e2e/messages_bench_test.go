package e2e

import (
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/blueline-app/blueline/bridge/messages/chatdb/chatdbtest"
)

// The Messages bridge, measured on the real daemon with a chat.db fixture:
//
//	go test -run '^$' -bench Messages -benchtime 50x ./e2e
//
// BenchmarkMessagesLatency inserts a row into chat.db and times how long it
// takes to be readable through the API and to reach a local webhook
// receiver, with the folder watcher and with polling alone.
// BenchmarkMessagesFirstStart, in messages_watch_bench_test.go, times the
// first start over 1,000,000 rows.

func BenchmarkMessagesLatency(b *testing.B) {
	for _, watch := range []bool{true, false} {
		b.Run(map[bool]string{true: "watcher", false: "polling"}[watch], func(b *testing.B) {
			benchLatency(b, watch)
		})
	}
}

func benchLatency(b *testing.B, watch bool) {
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			Data struct {
				GUID string `json:"guid"`
			} `json:"data"`
		}
		if json.NewDecoder(r.Body).Decode(&ev) == nil {
			mu.Lock()
			arrived[ev.Data.GUID] = time.Now()
			mu.Unlock()
		}
	}))
	b.Cleanup(srv.Close)
	home := b.TempDir()
	b.Setenv("HOME", home)
	dir := filepath.Join(home, "Library", "Messages")
	os.MkdirAll(dir, 0o700)
	fx := chatdbtest.New(b, dir)
	ca := filepath.Join(b.TempDir(), "ca.pem")
	writeFile(b, ca, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})))
	line := fmt.Sprintf("\n[[lines]]\nhandle = %q\nbridge = \"messages\"\nchat_db = %q\nosascript = \"/bin/false\"\nhelper_port = %d\nwatch = %v\n",
		macLine, fx.Path(), freeTCPPort(b), watch)
	td := startTestDaemon(b, line+"[limits]\nrequests_per_hour = 0\n[webhooks]\nallow_private_networks = true\nca_file = "+strconv.Quote(ca)+"\n")
	key := td.key()
	td.call("POST", "/v1/webhooks", key, map[string]any{"from": macLine, "url": srv.URL + "/h", "events": []string{"message.received"}})
	chat := fx.DirectChat("imessage", "+15551230001")

	var api, hook []time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		_, guid := fx.Insert(chatdbtest.Msg{Chat: chat, From: "+15551230001", Text: "ping " + strconv.Itoa(i)})
		waitCount(b, 30*time.Second, func() bool {
			items := td.call("GET", "/v1/messages?from="+macLine+"&to=%2B15551230001&limit=1", key, nil).Data()
			return len(items) == 1 && items[0]["guid"] == guid
		})
		api = append(api, time.Since(start))
		waitCount(b, 30*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			_, ok := arrived[guid]
			return ok
		})
		mu.Lock()
		hook = append(hook, arrived[guid].Sub(start))
		mu.Unlock()
		// Rows arrive at random moments, not in step with the poll.
		time.Sleep(time.Duration(i%7) * 37 * time.Millisecond)
	}
	b.StopTimer()
	b.ReportMetric(float64(median(api).Milliseconds()), "api-p50-ms")
	b.ReportMetric(float64(median(hook).Milliseconds()), "webhook-p50-ms")
	b.ReportMetric(float64(pctile(hook, 0.95).Milliseconds()), "webhook-p95-ms")
}

func median(d []time.Duration) time.Duration { return pctile(d, 0.5) }

func pctile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*q)]
}

// BenchmarkMessagesSend sends through the Messages bridge of the real daemon
// with the answering stand-in osascript, each send confirmed by its row in
// chat.db:
//
//	go test -run '^$' -bench MessagesSend -benchtime 200x ./e2e
//
// "throughput" posts b.N messages at once and reports sends per line per
// minute, the row written as soon as osascript answers; "row-after-200ms"
// sends one at a time, the row written 200 ms after osascript answers, and
// reports the median time from POST to sent.
func BenchmarkMessagesSend(b *testing.B) {
	const alice = "+15551230001"
	for _, tc := range []struct {
		name     string
		rowDelay time.Duration
	}{{"throughput", 0}, {"row-after-200ms", 200 * time.Millisecond}} {
		b.Run(tc.name, func(b *testing.B) {
			app := newMessagesApp(b, func(int, osaRun) answer { return accepted })
			dm := app.db.DirectChat("imessage", alice)
			// The Apple ID guard (on by default on a Messages line) would
			// pace these sends one a second and refuse the sixth unanswered.
			td, key := app.macDaemon(b, "guard = false", "[limits]\nrequests_per_hour = 0\n", alice, dm)
			app.setHandler(func(_ int, run osaRun) answer {
				return answer{then: func() {
					time.Sleep(tc.rowDelay) // Messages taking its time to write the row
					app.sendRow(dm, alice, run.args[2])
				}}
			})
			wait := func(id string) {
				waitCount(b, 5*time.Minute, func() bool {
					return td.call("GET", "/v1/outbox?id="+id, key, nil).Body["status"] == "sent"
				})
			}
			b.ResetTimer()
			start := time.Now()
			if tc.rowDelay == 0 {
				ids := make([]string, b.N)
				for i := range b.N {
					ids[i] = td.send(key, map[string]any{"from": macLine, "to": alice, "text": "message " + strconv.Itoa(i)})["id"].(string)
				}
				for _, id := range ids {
					wait(id)
				}
				b.ReportMetric(float64(b.N)/time.Since(start).Minutes(), "sends/min")
			} else {
				took := make([]time.Duration, b.N)
				for i := range b.N {
					t0 := time.Now()
					wait(td.send(key, map[string]any{"from": macLine, "to": alice, "text": "message " + strconv.Itoa(i)})["id"].(string))
					took[i] = time.Since(t0)
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "ms-median-post-to-sent")
			}
			b.StopTimer()
			if runs := len(app.kinds()); runs != b.N {
				b.Fatalf("%d osascript runs for %d sends", runs, b.N)
			}
		})
	}
}
