package linking

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"sync"
	"time"

	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/changes"
)

// A link found later (a client added to the records system after the
// invoice) changes a record its vendor has not changed: the vendor's
// version cannot carry it, so the gateway stamps one. A stamp says that
// the vendor's state Vendor of the record is served as version At; it is
// kept in the upstream state store, which gateways share in scale-out,
// so every instance and a restart answer the same version. A newer
// vendor state that would not rank above the stamp is stamped above it,
// so versions only rise; an older one read late keeps its own version
// and is dropped as older, as any stale read is.

type stamp struct {
	Vendor int64 `json:"v"`
	At     int64 `json:"a"`
}

// Versions settles the versions of one adapter's records against the
// links it changes.
type Versions struct {
	// State is the upstream state store: the record's last /v1 state
	// (changes.StateKey) and the stamps, under Prefix.
	State  changes.StateStore
	Clock  interface{ Now() time.Time }
	Prefix string

	locks [64]sync.Mutex
	once  sync.Once
	seed  maphash.Seed
}

// Settle gives rec, which the adapter made with its vendor's version and
// updated_at (*version, *updated), the version and updated_at it is
// served with: the vendor's, unless the record's last state here was the
// same vendor state (or a newer one no higher) with other content, which
// only a link changes.
func (v *Versions) Settle(ctx context.Context, t practice.Tenant, k practice.Kind, id string, version *int64, updated *time.Time, rec any) error {
	if v == nil || v.State == nil {
		return nil
	}
	v.once.Do(func() { v.seed = maphash.MakeSeed() })
	key := v.Prefix + changes.StateKey(t, k, id)
	mu := &v.locks[maphash.String(v.seed, key)%uint64(len(v.locks))]
	mu.Lock()
	defer mu.Unlock()

	var st *stamp
	raw, err := v.State.Last(ctx, key)
	if err != nil {
		return fmt.Errorf("link stamp of %s: %w", id, err)
	}
	if raw != nil {
		st = &stamp{}
		if json.Unmarshal(raw, st) != nil {
			st = nil
		}
	}
	vendor := *version
	before, err := v.State.Last(ctx, changes.StateKey(t, k, id))
	if err != nil {
		return err
	}
	if before == nil {
		if st != nil && st.Vendor == vendor && st.At > vendor {
			*version, *updated = st.At, time.UnixMilli(st.At).UTC()
		}
		return nil
	}
	var b struct {
		Version   int64     `json:"version"`
		UpdatedAt time.Time `json:"updated_at"`
	}
	if json.Unmarshal(before, &b) != nil {
		return nil
	}
	servedVendor := b.Version
	if st != nil && st.At == b.Version {
		servedVendor = st.Vendor
	}
	if vendor < servedVendor || vendor > b.Version {
		// An older state read late, dropped as older; or a newer one
		// whose version ranks above everything served.
		return nil
	}
	after, err := practice.Marshal(rec)
	if err != nil {
		return err
	}
	if same, err := sameContent(before, after); err != nil {
		return err
	} else if same {
		// What is served already: its version, stamped or not.
		*version, *updated = b.Version, b.UpdatedAt
		return nil
	}
	// The vendor's version cannot rank this state above the one served
	// (a link found, or lost by a cache that has not seen it yet): it is
	// stamped above.
	now := time.Now
	if v.Clock != nil {
		now = v.Clock.Now
	}
	at := now().UnixMilli()
	if at <= b.Version {
		at = b.Version + 1
	}
	out, err := json.Marshal(stamp{Vendor: vendor, At: at})
	if err != nil {
		return err
	}
	if err := v.State.Save(ctx, key, out); err != nil {
		return fmt.Errorf("save link stamp of %s: %w", id, err)
	}
	*version, *updated = at, time.UnixMilli(at).UTC()
	return nil
}

// sameContent reports whether two records differ in nothing but their
// version and updated_at.
func sameContent(a, b []byte) (bool, error) {
	strip := func(raw []byte) ([]byte, error) {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		delete(m, "version")
		delete(m, "updated_at")
		for k, v := range m {
			m[k] = practice.Canonical(bytes.TrimSpace(v))
		}
		return practice.Marshal(m)
	}
	x, err := strip(a)
	if err != nil {
		return false, nil
	}
	y, err := strip(b)
	if err != nil {
		return false, err
	}
	return bytes.Equal(x, y), nil
}
