package e2e

import (
	"testing"
	"time"

	"github.com/practicegw/practicegw/internal/eventually"
	"github.com/practicegw/practicegw/internal/redistest"
)

// Microsoft Graph's notifications through the real binary: the gateway
// subscribes the drive at its notification address once the sync holds
// it, and a file filed and then deleted in SharePoint reach the endpoint
// as document.filed and document.deleted within seconds, with the sync's
// polls ten minutes apart. With two gateways on one Redis the
// notifications reach the one that does not hold the sync (the first
// started holds every lease), which wakes the holder through Redis; alone,
// on bbolt, the one gateway takes and reads them.
func TestDocumentStoreNotifications(t *testing.T) {
	for _, shared := range []bool{false, true} {
		name := "bbolt"
		if shared {
			name = "redis, notified at the instance that does not hold the sync"
		}
		t.Run(name, func(t *testing.T) {
			v := startVendors(t, vendorOptions{contacts: 12, workItems: 12})
			env := []string{"PRACTICEGW_SYNC_POLL=10m"}
			if shared {
				redis := redistest.Start(t)
				env = append(env, "PRACTICEGW_REDIS="+redis.URL(), "PRACTICEGW_SECRETS_KEY="+secretsKey())
			}
			notified := freePort(t)
			env = append(env, "TEST_GRAPH_NOTIFY=http://"+notified+"/ingest/frm_hollis/sharepoint")
			opts := gatewayOptions{config: v.config, env: append(append([]string(nil), v.env...), env...)}
			if !shared {
				opts.addr = notified
			}
			holder := startGateway(t, opts)
			waitSyncs(t, holder, 20*time.Second, "every sync to be live", allLive)
			receiving := holder
			if shared {
				opts.addr = notified
				receiving = startGateway(t, opts)
			}
			eventually.True(t, 20*time.Second, poll, "the drive's subscription", func() bool {
				subs := v.g.Subscriptions()
				return len(subs) == 1 && subs[0].NotificationURL == "http://"+notified+"/ingest/frm_hollis/sharepoint"
			})
			tok := holder.issue("frm_hollis", false, allReadWrite...).Token
			rc := newReceiver(t)
			_, secret := register(t, holder, tok, rc.url(), "document.filed", "document.deleted")
			rc.setSecrets(secret)

			start := time.Now()
			id := v.g.AddFile("/Clients/Ann Client003/2026/Letters/Engagement letter 2026.pdf", 8_000, "application/pdf", time.Now())
			got := rc.wait(1, 15*time.Second)
			if e := got[0].envelope["event"]; e != "document.filed" {
				t.Fatalf("first event %v", got[0].envelope)
			}
			v.g.Delete(id)
			got = rc.wait(2, 15*time.Second)
			if e := got[1].envelope["event"]; e != "document.deleted" {
				t.Fatalf("second event %v", got[1].envelope)
			}
			if took := time.Since(start); took > 15*time.Second {
				t.Fatalf("the changes took %s, as long as a poll", took)
			}
			if s := v.g.Subscriptions()[0]; s.Failed != 0 || s.Told < 2 {
				t.Fatalf("notifications told %d, %d failed; the receiving gateway said:\n%s", s.Told, s.Failed, receiving.logs.String())
			}
			t.Logf("filed and deleted reached the endpoint in %s", time.Since(start).Round(time.Millisecond))
		})
	}
}
