package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"time"

	bbolt "go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/adapters/kit/notifications"
)

// The vendor notifications kept until what they name is read
// (adapters/kit/notifications.Inbox), in bucketNotices, a bucket per
// scope holding
//
//	seen/<key>    the body's expiry, Unix nanoseconds on the store's clock
//	items/<seq>   an item: kept at (8 bytes), due at (8), its bytes
//
// <seq> is the bucket's sequence, big-endian, so that items are walked in
// the order kept; its hex is the item's id.
var (
	bucketSeen  = []byte("seen")
	bucketItems = []byte("items")
)

// KeepNotification keeps items under key in scope unless key was kept
// within the window.
func (s *Store) KeepNotification(ctx context.Context, scope, key string, items [][]byte) (bool, error) {
	var fresh bool
	now := s.now()
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		fresh = false
		b, err := scopeBucket(tx, scope, true)
		if err != nil {
			return err
		}
		seen := b.Bucket(bucketSeen)
		if v := seen.Get([]byte(key)); len(v) == 8 && now.UnixNano() < int64(binary.BigEndian.Uint64(v)) {
			return nil
		}
		fresh = true
		if err := seen.Put([]byte(key), binary.BigEndian.AppendUint64(nil, uint64(now.Add(notifications.Window).UnixNano()))); err != nil {
			return err
		}
		ib := b.Bucket(bucketItems)
		for _, it := range items {
			seq, err := ib.NextSequence()
			if err != nil {
				return err
			}
			v := binary.BigEndian.AppendUint64(nil, uint64(now.UnixNano()))
			v = binary.BigEndian.AppendUint64(v, uint64(now.UnixNano()))
			if err := ib.Put(binary.BigEndian.AppendUint64(nil, seq), append(v, it...)); err != nil {
				return err
			}
		}
		return nil
	})
	return fresh, err
}

// TakeNotifications takes up to n of scope's due items, oldest first,
// due again after lease.
func (s *Store) TakeNotifications(ctx context.Context, scope string, n int, lease time.Duration) ([]notifications.Kept, error) {
	var out []notifications.Kept
	now := s.now().UnixNano()
	oldest := now - int64(notifications.Window)
	err := s.update(ctx, func(tx *bbolt.Tx) error {
		out = out[:0]
		b, err := scopeBucket(tx, scope, false)
		if b == nil || err != nil {
			return err
		}
		c := b.Bucket(bucketItems).Cursor()
		for k, v := c.First(); k != nil && len(out) < n; {
			if len(v) < 16 {
				k, v = c.Next()
				continue
			}
			at, due := int64(binary.BigEndian.Uint64(v)), int64(binary.BigEndian.Uint64(v[8:]))
			if at < oldest {
				key := bytes.Clone(k)
				if err := c.Delete(); err != nil {
					return err
				}
				k, v = c.Seek(key)
				continue
			}
			if due <= now {
				nv := bytes.Clone(v)
				binary.BigEndian.PutUint64(nv[8:], uint64(now+int64(lease)))
				key := bytes.Clone(k)
				out = append(out, notifications.Kept{ID: hex.EncodeToString(key), Item: bytes.Clone(v[16:]), At: time.Unix(0, at)})
				if err := b.Bucket(bucketItems).Put(key, nv); err != nil {
					return err
				}
				// A put may move the cursor's page: seek back past it.
				k, v = c.Seek(key)
			}
			k, v = c.Next()
		}
		return nil
	})
	return out, err
}

// SettleNotification drops a taken item read, or makes it due after retry.
func (s *Store) SettleNotification(ctx context.Context, scope, id string, done bool, retry time.Duration) error {
	key, err := hex.DecodeString(id)
	if err != nil || len(key) != 8 {
		return nil // no item of ours
	}
	now := s.now()
	return s.update(ctx, func(tx *bbolt.Tx) error {
		b, err := scopeBucket(tx, scope, false)
		if b == nil || err != nil {
			return err
		}
		ib := b.Bucket(bucketItems)
		v := ib.Get(key)
		switch {
		case len(v) < 16:
			return nil
		case done:
			return ib.Delete(key)
		}
		nv := bytes.Clone(v)
		binary.BigEndian.PutUint64(nv[8:], uint64(now.Add(retry).UnixNano()))
		return ib.Put(key, nv)
	})
}

// scopeBucket is scope's bucket, made when make is set (nil otherwise
// when there is none).
func scopeBucket(tx *bbolt.Tx, scope string, make bool) (*bbolt.Bucket, error) {
	root := tx.Bucket([]byte(bucketNotices))
	if !make {
		return root.Bucket([]byte(scope)), nil
	}
	b, err := root.CreateBucketIfNotExists([]byte(scope))
	if err != nil {
		return nil, err
	}
	for _, sub := range [][]byte{bucketSeen, bucketItems} {
		if _, err := b.CreateBucketIfNotExists(sub); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// ExpireNotifications forgets the bodies kept longer than the window ago,
// and the scopes left with nothing.
func (s *Store) ExpireNotifications(_ context.Context) (int, error) {
	n := 0
	now := s.now().UnixNano()
	err := s.db.Update(func(tx *bbolt.Tx) error {
		n = 0
		root := tx.Bucket([]byte(bucketNotices))
		var empty [][]byte
		err := root.ForEachBucket(func(scope []byte) error {
			b := root.Bucket(scope)
			c := b.Bucket(bucketSeen).Cursor()
			for k, v := c.First(); k != nil; {
				if len(v) == 8 && now < int64(binary.BigEndian.Uint64(v)) {
					k, v = c.Next()
					continue
				}
				key := bytes.Clone(k)
				if err := c.Delete(); err != nil {
					return err
				}
				n++
				k, v = c.Seek(key)
			}
			if k, _ := b.Bucket(bucketSeen).Cursor().First(); k == nil {
				if k, _ := b.Bucket(bucketItems).Cursor().First(); k == nil {
					empty = append(empty, bytes.Clone(scope))
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, scope := range empty {
			if err := root.DeleteBucket(scope); err != nil {
				return err
			}
		}
		return nil
	})
	return n, err
}

var _ notifications.Inbox = (*Store)(nil)
