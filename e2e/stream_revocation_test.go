package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
	sse "github.com/tmaxmax/go-sse"
)

// openStream opens GET /v1/events/stream on g and reads its messages into
// a channel, closed when the stream ends.
func openStream(t *testing.T, g *gateway, token string) <-chan sse.Event {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+g.addr+"/v1/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	events := make(chan sse.Event, 100)
	go func() {
		defer close(events)
		defer resp.Body.Close()
		for ev, err := range sse.Read(resp.Body, nil) {
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	return events
}

// A credential revoked through one gateway ends its open stream on the
// other within a second, with a last error event saying why, and events
// raised once that instance refuses the credential never reach it; practicegw listen on it stops
// with that reason and a non-zero exit instead of reconnecting.
func TestAStreamEndsWithinASecondOfItsCredentialsRevocation(t *testing.T) {
	t.Run("embedded", func(t *testing.T) {
		g := startGateway(t, gatewayOptions{})
		streamEndsOnRevocation(t, g, g)
	})
	t.Run("two gateways on Redis", func(t *testing.T) {
		_, a, b := twoGateways(t)
		streamEndsOnRevocation(t, a, b)
	})
}

func streamEndsOnRevocation(t *testing.T, revoker, streamer *gateway) {
	raiser := revoker.issue("frm_acme", true, "events:read", "webhooks:write").Token
	cred := revoker.issue("frm_acme", true, "events:read")
	// Seen by the streaming instance before it opens the stream.
	eventually.True(t, 5*time.Second, poll, "the credential to work on the streaming instance", func() bool {
		return streamer.do(t, "GET", "/v1/events?limit=1", cred.Token, nil).StatusCode == 200
	})
	events := openStream(t, streamer, cred.Token)
	l := startListen(t, "http://"+streamer.addr, cred.Token, "--forward-to", newReceiver(t).url())

	before := trigger(t, streamer, raiser, "client.created")
	waitForData(t, events, before)
	if _, err := revoker.cli("credential", "revoke", cred.ID); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	// Once the streaming instance refuses the credential, nothing more
	// reaches its stream.
	eventually.True(t, time.Second, poll, "the streaming instance to refuse the revoked credential", func() bool {
		return streamer.do(t, "GET", "/v1/events?limit=1", cred.Token, nil).StatusCode == 401
	})
	after := trigger(t, streamer, raiser, "client.created")
	code, timeout := "", time.After(5*time.Second)
	for open := true; open; {
		select {
		case ev, ok := <-events:
			switch {
			case !ok:
				open = false
			case ev.Type == "error":
				var body struct{ Error struct{ Code string } }
				if err := json.Unmarshal([]byte(ev.Data), &body); err != nil {
					t.Fatalf("error event %q: %v", ev.Data, err)
				}
				code = body.Error.Code
			case strings.Contains(ev.Data, after):
				t.Fatalf("an event raised after the instance refused the credential reached its stream")
			}
		case <-timeout:
			t.Fatalf("the revoked credential's stream is still open 5s after the revocation")
		}
	}
	took := time.Since(revoked)
	if code != "credential_revoked" || took > time.Second {
		t.Fatalf("the stream ended %s after the revocation with %q, want within 1s with credential_revoked", took, code)
	}
	t.Logf("the stream ended %s after the revocation", took.Round(time.Millisecond))

	select {
	case <-l.done:
	case <-time.After(5 * time.Second):
		t.Fatalf("practicegw listen still runs 5s after its credential was revoked:\n%s", l.out.String())
	}
	if l.err == nil || !strings.Contains(l.out.String(), "credential_revoked") || strings.Contains(l.out.String(), "reconnecting") {
		t.Fatalf("practicegw listen ended with %v:\n%s", l.err, l.out.String())
	}
}

// waitForData waits for a message whose data holds s.
func waitForData(t *testing.T, events <-chan sse.Event, s string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended before %s arrived", s)
			}
			if strings.Contains(ev.Data, s) {
				return
			}
		case <-timeout:
			t.Fatalf("%s did not arrive within 10s", s)
		}
	}
}
