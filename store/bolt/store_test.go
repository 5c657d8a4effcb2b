package bolt_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice/readmodel"
	boltstore "github.com/practicegw/practicegw/store/bolt"
	"github.com/practicegw/practicegw/store/connection"
	"github.com/practicegw/practicegw/store/credential"
	"github.com/practicegw/practicegw/store/storetest"
)

func open(t *testing.T) (*boltstore.Store, *bbolt.DB) {
	t.Helper()
	db, err := bbolt.Open(filepath.Join(t.TempDir(), "shared.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	// Someone else's bucket in the shared file.
	if err := db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists([]byte("records"))
		if err != nil {
			return err
		}
		return b.Put([]byte("k"), []byte("v"))
	}); err != nil {
		t.Fatal(err)
	}
	st, err := boltstore.New(db, nil, boltstore.WithSecrets(secrets))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := boltstore.New(db, nil, boltstore.WithSecrets(secrets)); err != nil {
		t.Fatalf("opening twice: %v", err)
	}
	return st, db
}

// secrets is the key the tests' stores seal under.
var secrets, _ = sealed.Random()

func TestConformance(t *testing.T) {
	storetest.Deliveries(t, func(t *testing.T) dispatcher.Backends {
		st, db := open(t)
		t.Cleanup(func() { checkTidy(t, db) })
		return st.Backends()
	})
}

// The gateway's own stores, over one file opened twice: what one handle
// writes the other reads, as after a restart.
func TestCredentialsConformance(t *testing.T) {
	storetest.Credentials(t, func(t *testing.T) (storetest.CredentialStore, storetest.CredentialStore) {
		st, db := open(t)
		return st, reopen(t, db)
	})
}

func TestIdempotencyConformance(t *testing.T) {
	storetest.Idempotency(t, func(t *testing.T, inFlight time.Duration) (storetest.IdempotencyStore, storetest.IdempotencyStore) {
		_, db := open(t)
		return reopen(t, db, boltstore.WithInFlight(inFlight)), reopen(t, db, boltstore.WithInFlight(inFlight))
	})
	t.Run("sealed", func(t *testing.T) {
		st, db := open(t)
		storetest.IdempotencySealed(t, st, reopen(t, db), func() []byte { return dumpBolt(db) })
	})
}

// An answer an earlier version remembered in plain text is still
// replayed, until its key expires.
func TestIdempotencyOfAnEarlierVersion(t *testing.T) {
	st, db := open(t)
	now := time.Now().UTC()
	err := db.Update(func(tx *bbolt.Tx) error {
		raw := fmt.Sprintf(`{"fingerprint":"fp","status":201,"body":"eyJpZCI6ImNsaV8xIn0=","created_at":%q}`, now.Format(time.RFC3339Nano))
		return tx.Bucket([]byte("gw_idempotency")).Put([]byte("crd_a:old"), []byte(raw))
	})
	if err != nil {
		t.Fatal(err)
	}
	prior, err := st.Begin(context.Background(), "crd_a:old", "fp")
	if err != nil || prior == nil || string(prior.Body) != `{"id":"cli_1"}` || prior.Status != 201 {
		t.Fatalf("the earlier version's answer: %+v, %v", prior, err)
	}
}

func TestUsageConformance(t *testing.T) {
	storetest.Usage(t, func(t *testing.T) (storetest.UsageStore, storetest.UsageStore) {
		st, db := open(t)
		return st, reopen(t, db)
	})
}

func TestUpstreamStateConformance(t *testing.T) {
	storetest.Upstream(t, func(t *testing.T) (storetest.UpstreamState, storetest.UpstreamState) {
		st, db := open(t)
		return st, reopen(t, db)
	})
}

// The generated signing key and endpoint secrets are sealed in the file.
func TestSecretsConformance(t *testing.T) {
	storetest.Secrets(t, func(t *testing.T) storetest.SecretsBackend {
		db, err := bbolt.Open(filepath.Join(t.TempDir(), "secrets.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return storetest.SecretsBackend{
			Open: func(key *sealed.Key) (storetest.SecretStore, error) {
				return boltstore.New(db, nil, boltstore.WithSecrets(key))
			},
			Raw: func() []byte {
				var raw []byte
				db.View(func(tx *bbolt.Tx) error {
					return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
						return b.ForEach(func(k, v []byte) error {
							raw = append(append(raw, k...), v...)
							return nil
						})
					})
				})
				return raw
			},
			WritePlain: func(key credential.SigningKey, ep dispatcher.Endpoint) {
				// The buckets and records of the version before sealing.
				rec, _ := json.Marshal(map[string]any{"endpoint": ep, "firm": ep.Firm, "secrets": ep.Secrets})
				err := db.Update(func(tx *bbolt.Tx) error {
					for bucket, kv := range map[string][2]string{
						"gw_signing_keys":              {key.ID, string(key.Secret)},
						"dispatch_endpoints":           {ep.ID, string(rec)},
						"dispatch_endpoints_by_tenant": {ep.Firm + "\x00live\x00" + ep.ID, ""},
					} {
						b, err := tx.CreateBucketIfNotExists([]byte(bucket))
						if err != nil {
							return err
						}
						if err := b.Put([]byte(kv[0]), []byte(kv[1])); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			},
			UpstreamRaw: func(key string) []byte {
				var v []byte
				db.View(func(tx *bbolt.Tx) error {
					v = bytes.Clone(tx.Bucket([]byte("gw_upstream_state")).Get([]byte(key)))
					return nil
				})
				return v
			},
			WriteUpstreamRaw: func(key string, value []byte) {
				err := db.Update(func(tx *bbolt.Tx) error {
					b, err := tx.CreateBucketIfNotExists([]byte("gw_upstream_state"))
					if err != nil {
						return err
					}
					return b.Put([]byte(key), value)
				})
				if err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

func TestNeedsASecretsKey(t *testing.T) {
	_, db := open(t)
	if _, err := boltstore.New(db, nil); err == nil {
		t.Fatal("a store without a secrets key opened")
	}
}

func reopen(t *testing.T, db *bbolt.DB, opts ...boltstore.Option) *boltstore.Store {
	t.Helper()
	st, err := boltstore.New(db, nil, append(opts, boltstore.WithSecrets(secrets))...)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// checkTidy runs after each conformance test: the store shares its file,
// so it must leave other buckets alone and keep to its prefixes.
func checkTidy(t *testing.T, db *bbolt.DB) {
	db.View(func(tx *bbolt.Tx) error {
		if string(tx.Bucket([]byte("records")).Get([]byte("k"))) != "v" {
			t.Error("a foreign bucket was disturbed")
		}
		return tx.ForEach(func(name []byte, _ *bbolt.Bucket) error {
			if string(name) != "records" && !strings.HasPrefix(string(name), "dispatch_") && !strings.HasPrefix(string(name), "gw_") {
				t.Errorf("bucket %q lacks the dispatch_ or gw_ prefix", name)
			}
			return nil
		})
	})
}

// Concurrent writes share commits, and one failing write does not fail the
// others in its batch.
func TestGroupCommit(t *testing.T) {
	st, _ := open(t)
	ctx := context.Background()
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	if err := st.CreateEndpoint(ctx, dispatcher.Endpoint{ID: "we_a", Firm: "frm_acme", Status: dispatcher.EndpointEnabled}); err != nil {
		t.Fatal(err)
	}
	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%50 == 0 {
				// An update that refuses: its error is its own.
				_, err := st.UpdateEndpoint(ctx, "we_missing", func(*dispatcher.Endpoint) error { return nil })
				if err == nil {
					errs <- fmt.Errorf("update of a missing endpoint succeeded")
				}
				return
			}
			d := dispatcher.Delivery{ID: fmt.Sprintf("dlv_%03d", i), EventID: "evt_1", EndpointID: "we_a", Firm: "frm_acme",
				State: dispatcher.StatePending, NextAttemptAt: t0, CreatedAt: t0}
			if n, err := st.Enqueue(ctx, []dispatcher.Delivery{d}); err != nil || n != 1 {
				errs <- fmt.Errorf("enqueue %s: %d, %v", d.ID, n, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got, _ := st.Backlog(ctx); got != n-n/50 {
		t.Fatalf("backlog %d, want %d", got, n-n/50)
	}
}

func TestReadModelConformance(t *testing.T) {
	storetest.ReadModel(t, func(t *testing.T) (readmodel.Store, readmodel.Store) {
		st, db := open(t)
		t.Cleanup(func() { checkTidy(t, db) })
		return st.ReadModel(), reopen(t, db).ReadModel()
	})
}

func TestCheckpointsConformance(t *testing.T) {
	storetest.Checkpoints(t, func(t *testing.T) (readmodel.Checkpoints, readmodel.Checkpoints) {
		st, db := open(t)
		return st.ReadModel(), reopen(t, db).ReadModel()
	})
}

func TestReadModelPurgeConformance(t *testing.T) {
	storetest.ReadModelPurge(t, func(t *testing.T) (storetest.PurgeStore, storetest.PurgeStore) {
		st, db := open(t)
		return st.ReadModel(), reopen(t, db).ReadModel()
	})
}

func TestReadModelFencesConformance(t *testing.T) {
	storetest.ReadModelFences(t, func(t *testing.T) (storetest.FencedStore, storetest.FencedStore) {
		st, db := open(t)
		t.Cleanup(func() { checkTidy(t, db) })
		return st.ReadModel(), reopen(t, db).ReadModel()
	})
}

func TestUpstreamFencesConformance(t *testing.T) {
	storetest.UpstreamFences(t, func(t *testing.T) (readmodel.Fencer, storetest.FencedUpstream) {
		st, db := open(t)
		return st.ReadModel(), reopen(t, db)
	})
}

func TestUpstreamSwapsConformance(t *testing.T) {
	storetest.UpstreamSwaps(t, func(t *testing.T) (readmodel.Fencer, storetest.SwappingUpstream, storetest.SwappingUpstream) {
		st, db := open(t)
		return st.ReadModel(), st, reopen(t, db)
	})
}

func TestLocksConformance(t *testing.T) {
	storetest.Locks(t, func(t *testing.T) (upstream.Locks, upstream.Locks) {
		st, db := open(t)
		return st.ReadModel(), reopen(t, db).ReadModel()
	})
}

func TestLeasesConformance(t *testing.T) {
	storetest.Leases(t, func(t *testing.T) (readmodel.Leases, readmodel.Leases) {
		st, db := open(t)
		return st.ReadModel(), reopen(t, db).ReadModel()
	})
}

func TestNotificationsConformance(t *testing.T) {
	storetest.Notifications(t, func(t *testing.T) (storetest.NotificationInbox, storetest.NotificationInbox) {
		st, db := open(t)
		return st, reopen(t, db)
	})
}

func TestForwardNoncesConformance(t *testing.T) {
	storetest.ForwardNonces(t, func(t *testing.T) (storetest.Nonces, storetest.Nonces) {
		st, db := open(t)
		return st, reopen(t, db)
	})
}

func TestFencedCheckpointsConformance(t *testing.T) {
	storetest.FencedCheckpoints(t, func(t *testing.T) (storetest.LeasedCheckpoints, storetest.LeasedCheckpoints) {
		st, db := open(t)
		return st.ReadModel(), reopen(t, db).ReadModel()
	})
}

// Connections over one file opened twice; a handle under another key is
// refused at open, as the store checks its key then.
func TestConnectionsConformance(t *testing.T) {
	storetest.Connections(t, func(t *testing.T) storetest.ConnectionsBackend {
		db, err := bbolt.Open(filepath.Join(t.TempDir(), "connections.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return storetest.ConnectionsBackend{
			Open: func(key *sealed.Key) (storetest.ConnectStore, error) {
				return boltstore.New(db, nil, boltstore.WithSecrets(key))
			},
			Raw: func() []byte { return dumpBolt(db) },
			CopyAuthorization: func(from, to string) {
				err := db.Update(func(tx *bbolt.Tx) error {
					b := tx.Bucket([]byte("gw_authorizations"))
					return b.Put(stateDigest(to), bytes.Clone(b.Get(stateDigest(from))))
				})
				if err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}

// The consents nobody came back for leave the file at the app's expiry,
// by the store's clock; those still awaited stay.
func TestExpireAuthorizations(t *testing.T) {
	_, db := open(t)
	ctx := context.Background()
	now := time.Now()
	st := reopen(t, db)
	for state, expires := range map[string]time.Time{"state-gone": now.Add(-time.Second), "state-due": now, "state-awaited": now.Add(time.Minute)} {
		a := connection.Authorization{OAuthState: state, Start: "start-" + state, Connection: "con_a", Firm: "frm_acme", Verifier: "v-" + state, Expires: expires}
		if err := st.SaveAuthorization(ctx, a); err != nil {
			t.Fatal(err)
		}
	}
	st, err := boltstore.New(db, func() time.Time { return now }, boltstore.WithSecrets(secrets))
	if err != nil {
		t.Fatal(err)
	}
	// Two consents and their two start links.
	if n, err := st.ExpireAuthorizations(ctx); err != nil || n != 4 {
		t.Fatalf("expired %d, %v; want 4", n, err)
	}
	var left, starts int
	db.View(func(tx *bbolt.Tx) error {
		left = tx.Bucket([]byte("gw_authorizations")).Stats().KeyN
		starts = tx.Bucket([]byte("gw_consent_starts")).Stats().KeyN
		return nil
	})
	if left != 1 || starts != 1 {
		t.Fatalf("%d consents and %d start links left, want the one awaited", left, starts)
	}
	if _, err := st.StartAuthorization(ctx, "start-state-awaited", "browser", now); err != nil {
		t.Fatalf("the consent awaited: %v", err)
	}
	if a, err := st.TakeAuthorization(ctx, "state-awaited", "browser", now); err != nil || a.Verifier != "v-state-awaited" {
		t.Fatalf("the consent awaited: %+v, %v", a, err)
	}
}

// dumpBolt is every key and value in the file.
func dumpBolt(db *bbolt.DB) []byte {
	var raw []byte
	db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			return b.ForEach(func(k, v []byte) error {
				raw = append(append(raw, k...), v...)
				return nil
			})
		})
	})
	return raw
}

func BenchmarkListConnections(b *testing.B) {
	db, err := bbolt.Open(filepath.Join(b.TempDir(), "bench.db"), 0o600, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	st, err := boltstore.New(db, nil, boltstore.WithSecrets(secrets))
	if err != nil {
		b.Fatal(err)
	}
	storetest.BenchmarkListConnections(b, st, 500)
}

// stateDigest is the key a consent is kept under: its state's SHA-256.
func stateDigest(state string) []byte {
	sum := sha256.Sum256([]byte(state))
	return []byte(hex.EncodeToString(sum[:]))
}
