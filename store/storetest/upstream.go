package storetest

import (
	"context"
	"testing"
)

// UpstreamState is what vendor adapters keep of the records they have
// seen, so that a vendor's change notification has a "before".
type UpstreamState interface {
	Last(ctx context.Context, key string) ([]byte, error)
	Save(ctx context.Context, key string, state []byte) error
}

// Upstream checks an UpstreamState. open returns an empty store and a
// second handle on the same state.
func Upstream(t *testing.T, open func(t *testing.T) (store, reopen UpstreamState)) {
	ctx := context.Background()
	st, other := open(t)
	if got, err := st.Last(ctx, "karbon/frm_acme/work/1"); err != nil || got != nil {
		t.Fatalf("never seen: %q, %v; want nil, nil", got, err)
	}
	for _, v := range []string{`{"stage":"planned"}`, `{"stage":"in_review"}`} {
		if err := st.Save(ctx, "karbon/frm_acme/work/1", []byte(v)); err != nil {
			t.Fatal(err)
		}
		got, err := other.Last(ctx, "karbon/frm_acme/work/1")
		if err != nil || string(got) != v {
			t.Fatalf("after saving %s: %q, %v", v, got, err)
		}
	}
	if got, err := other.Last(ctx, "karbon/frm_acme/work/2"); err != nil || got != nil {
		t.Fatalf("another key: %q, %v; want nil, nil", got, err)
	}
}
