package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
)

// An embedded gateway killed with SIGKILL in the middle of a burst of
// writes loses no acknowledged change's webhook: a change, its event and
// its deliveries are one commit of its file, and the deliveries it was
// sending when it died (leased to it, some perhaps received) are sent again
// at once when it starts again on the same data, under the same id.
func TestEmbeddedGatewayKilledMidBurstLosesNothing(t *testing.T) {
	g := startGateway(t, gatewayOptions{})
	tok := g.issueWith("frm_acme", false, "1000000/s", allReadWrite...).Token
	rc := newReceiver(t)
	_, secret := register(t, g, tok, rc.url(), "job.opened")
	rc.setSecrets(secret)
	client := g.do(t, "GET", "/v1/clients?limit=1", tok, nil).json(t)["data"].([]any)[0].(map[string]any)["id"].(string)

	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		mu       sync.Mutex
		created  = map[string]bool{} // job ids the API confirmed
		refused  atomic.Int64
		failures []string
	)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				body := fmt.Sprintf(`{"title":"Burst %d-%d","client":%q}`, w, i, client)
				req, _ := http.NewRequest("POST", "http://"+g.addr+"/v1/jobs", strings.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Authorization", "Bearer "+tok)
				status, out := send(req)
				mu.Lock()
				switch {
				case status == 201:
					var job struct{ ID string }
					json.Unmarshal([]byte(out), &job)
					created[job.ID] = true
				case status == 0:
					refused.Add(1) // the killed gateway, in flight or down
					time.Sleep(20 * time.Millisecond)
				default:
					failures = append(failures, fmt.Sprintf("%d %s", status, out))
				}
				mu.Unlock()
			}
		}()
	}
	createdNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(created)
	}
	poll := 10 * time.Millisecond
	eventually.True(t, time.Minute, poll, "jobs created before the kill", func() bool { return createdNow() >= 300 })
	g.kill()
	eventually.True(t, time.Minute, poll, "requests meeting the killed gateway", func() bool { return refused.Load() >= 10 })
	g.start(defaultCaddyfile())
	before := createdNow()
	eventually.True(t, time.Minute, poll, "jobs created after the restart", func() bool { return createdNow() >= before+100 })
	stop.Store(true)
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d writes failed with an answer (first: %s)", len(failures), failures[0])
	}
	eventually.NoError(t, time.Minute, 50*time.Millisecond, "every created job's event", func() error {
		got := map[string]string{}
		rc.mu.Lock()
		for _, d := range rc.got {
			job := d.envelope["data"].(map[string]any)["job_id"].(string)
			if prev, ok := got[job]; ok && prev != d.id {
				t.Fatalf("job %s delivered under two event ids: %s and %s", job, prev, d.id)
			}
			got[job] = d.id
		}
		total := len(rc.got)
		rc.mu.Unlock()
		missing := 0
		for id := range created {
			if _, ok := got[id]; !ok {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d created jobs never reached the receiver", missing, len(created))
		}
		t.Logf("all %d events delivered (%d deliveries, %d requests met the killed gateway)", len(created), total, refused.Load())
		return nil
	})
}
