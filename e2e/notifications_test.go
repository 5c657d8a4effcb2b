package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
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

// Google Drive's push channels and Dropbox's webhooks through the real
// binary, as Graph's above: the gateway makes its channel on the drive's
// changes once the sync holds it (Drive's sync message answered), or
// answers the challenge Dropbox sends the address the operator registers;
// a file filed and then deleted reach the endpoint as document.filed and
// document.deleted within seconds, the polls ten minutes apart; a message
// whose channel token or signature is not the vendor's is refused; and
// with two gateways on one Redis the vendor notifies the one that does
// not hold the sync, which checks it and wakes the holder through Redis.
func TestDriveAndDropboxNotifications(t *testing.T) {
	type store struct {
		// block is the firm's documents block, given the double's URL.
		block func(notify string) string
		// subscribe waits for the vendor to hold the gateway's
		// subscription at notify, or makes it as the operator does.
		subscribe func(t *testing.T, notify string)
		// told counts the notifications the vendor sent, and those not
		// answered 2xx.
		told   func() (sent, failed int)
		add    func(p string) string
		remove func(id string)
		// forged posts a notification the vendor did not send to notify.
		forged func(t *testing.T, notify string) int
	}
	stores := map[string]func(t *testing.T) store{
		"google_drive": func(t *testing.T) store {
			d := vendortest.NewGDrive()
			t.Cleanup(d.Close)
			return store{
				block: func(notify string) string {
					return fmt.Sprintf("documents google_drive {\n\t\t\t\taccess_token %s\n\t\t\t\tbase_url %s\n\t\t\t\troot_folder_id root\n\t\t\t\tnotification_url %s\n\t\t\t}", d.Token, d.URL, notify)
				},
				subscribe: func(t *testing.T, notify string) {
					// Its sync message is sent at once: the instance that
					// made it may be the only one listening yet.
					eventually.True(t, 20*time.Second, poll, "the drive's channel, its sync message sent", func() bool {
						chs := d.Channels()
						return len(chs) == 1 && chs[0].Address == notify && chs[0].Messages >= 1
					})
				},
				add:    func(p string) string { return d.AddFile(p, 8_000, "application/pdf", time.Now()) },
				remove: d.Delete,
				forged: func(t *testing.T, notify string) int {
					ch := d.Channels()[0]
					req, _ := http.NewRequest(http.MethodPost, notify, nil)
					req.Header.Set("X-Goog-Channel-ID", ch.ID)
					req.Header.Set("X-Goog-Channel-Token", "not-the-channel-token")
					req.Header.Set("X-Goog-Resource-ID", ch.ResourceID)
					req.Header.Set("X-Goog-Resource-State", "change")
					req.Header.Set("X-Goog-Message-Number", "99")
					code, _ := send(req)
					return code
				},
				told: func() (int, int) {
					ch := d.Channels()[0]
					return ch.Messages, ch.Failed
				},
			}
		},
		"dropbox": func(t *testing.T) store {
			d := vendortest.NewDropbox()
			t.Cleanup(d.Close)
			return store{
				block: func(string) string {
					return fmt.Sprintf("documents dropbox {\n\t\t\t\taccess_token %s\n\t\t\t\tbase_url %s\n\t\t\t\troot /Clients\n\t\t\t\tapp_secret %s\n\t\t\t}", d.Token, d.URL, d.Identity.ClientSecret)
				},
				subscribe: func(t *testing.T, notify string) {
					if err := d.RegisterWebhook(notify); err != nil {
						t.Fatal(err)
					}
				},
				add:    func(p string) string { return d.AddFile(p, 8_000, time.Now()) },
				remove: d.Delete,
				forged: func(t *testing.T, notify string) int {
					body := `{"list_folder":{"accounts":["` + d.AccountID + `"]},"delta":{"users":[12345678]}}`
					req, _ := http.NewRequest(http.MethodPost, notify, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("X-Dropbox-Signature", vendortest.SignDropbox("not-the-app-secret", []byte(body)))
					code, _ := send(req)
					return code
				},
				told: d.Notified,
			}
		},
	}
	for _, system := range []string{"google_drive", "dropbox"} {
		for _, shared := range []bool{false, true} {
			name := system + "/bbolt"
			if shared {
				name = system + "/redis, notified at the instance that does not hold the sync"
			}
			t.Run(name, func(t *testing.T) {
				s := stores[system](t)
				s.add("/Clients/Ann Client001/2025/Tax return/Tax return 2025.pdf")
				notifyAddr := freePort(t)
				notify := "http://" + notifyAddr + "/ingest/frm_docs/" + system
				config := filepath.Join(t.TempDir(), "Caddyfile")
				caddyfile := `{
	admin {$PRACTICEGW_ADMIN}
	practicegw {
		data_dir {$PRACTICEGW_DATA}
		redis {$PRACTICEGW_REDIS}
		firm frm_docs {
			` + s.block(notify) + `
		}
	}
}

http://{$PRACTICEGW_LISTEN} {
	@probes path /healthz /readyz
	handle @probes {
		practicegw_health
	}
	handle /ingest/* {
		practicegw_ingest
	}
	handle /v1/openapi.json {
		practicegw_api
	}
	handle /v1/* {
		practicegw_auth
		practicegw_ratelimit
		practicegw_api
	}
	handle {
		practicegw_api
	}
}
`
				if err := os.WriteFile(config, []byte(caddyfile), 0o644); err != nil {
					t.Fatal(err)
				}
				env := []string{"PRACTICEGW_SYNC_POLL=10m"}
				if shared {
					redis := redistest.Start(t)
					env = append(env, "PRACTICEGW_REDIS="+redis.URL(), "PRACTICEGW_SECRETS_KEY="+secretsKey())
				}
				opts := gatewayOptions{config: config, env: env}
				if !shared {
					opts.addr = notifyAddr
				}
				holder := startGateway(t, opts)
				waitSyncs(t, holder, 20*time.Second, "the sync to be live", allLive)
				receiving := holder
				if shared {
					opts.addr = notifyAddr
					receiving = startGateway(t, opts)
				}
				s.subscribe(t, notify)
				if sent, failed := s.told(); !shared && failed != 0 {
					t.Fatalf("%d of the vendor's %d first notifications were not answered 2xx:\n%s", failed, sent, holder.logs.String())
				}
				sent0, failed0 := s.told()
				tok := holder.issue("frm_docs", false, allReadWrite...).Token
				rc := newReceiver(t)
				_, secret := register(t, holder, tok, rc.url(), "document.filed", "document.deleted")
				rc.setSecrets(secret)

				start := time.Now()
				id := s.add("/Clients/Ann Client003/2026/Letters/Engagement letter 2026.pdf")
				got := rc.wait(1, 15*time.Second)
				if e := got[0].envelope["event"]; e != "document.filed" {
					t.Fatalf("first event %v", got[0].envelope)
				}
				s.remove(id)
				got = rc.wait(2, 15*time.Second)
				if e := got[1].envelope["event"]; e != "document.deleted" {
					t.Fatalf("second event %v", got[1].envelope)
				}
				if took := time.Since(start); took > 15*time.Second {
					t.Fatalf("the changes took %s, as long as a poll", took)
				}
				if sent, failed := s.told(); sent-sent0 < 2 || failed != failed0 {
					t.Fatalf("the vendor sent %d notifications, %d not answered 2xx; the receiving gateway said:\n%s", sent-sent0, failed-failed0, receiving.logs.String())
				}
				if code := s.forged(t, notify); code != http.StatusUnauthorized {
					t.Errorf("a notification the vendor did not send answered %d, want 401", code)
				}
				t.Logf("filed and deleted reached the endpoint in %s", time.Since(start).Round(time.Millisecond))
			})
		}
	}
}
