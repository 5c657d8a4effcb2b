package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// spread is a sample's median and 99th percentile.
type spread struct{ p50, p99 time.Duration }

func spreadOf(ds []time.Duration) spread {
	if len(ds) == 0 {
		return spread{}
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return spread{p50: s[len(s)/2], p99: s[min(len(s)-1, len(s)*99/100)]}
}

// floor is what the machine itself takes for the two things a change's
// webhook cannot do without: a durable commit, and a request over
// loopback.
type floor struct{ commit, http spread }

// measureFloor times 500 bbolt commits of a record-sized value with fsync
// (bbolt's default durability) in a file where the systems keep theirs,
// and 2,000 loopback POSTs of an envelope-sized body through a client like
// the receiver's senders.
func measureFloor(ctx context.Context) (floor, error) {
	dir, err := os.MkdirTemp("", "practicegw-bench-floor-")
	if err != nil {
		return floor{}, err
	}
	defer os.RemoveAll(dir)
	db, err := bolt.Open(filepath.Join(dir, "floor.db"), 0o600, nil)
	if err != nil {
		return floor{}, err
	}
	defer db.Close()
	value := bytes.Repeat([]byte("x"), 700)
	var commits []time.Duration
	for i := range 500 {
		t := time.Now()
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("floor"))
			if err != nil {
				return err
			}
			return b.Put(fmt.Appendf(nil, "%08d", i), value)
		})
		if err != nil {
			return floor{}, err
		}
		commits = append(commits, time.Since(t))
	}

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
	}))
	defer srv.Close()
	body := bytes.Repeat([]byte("y"), 1200)
	var trips []time.Duration
	for range 2000 {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, bytes.NewReader(body))
		t := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return floor{}, err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		trips = append(trips, time.Since(t))
	}
	return floor{commit: spreadOf(commits), http: spreadOf(trips)}, nil
}
