package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/practicegw/practicegw/practice/changes"
	"github.com/practicegw/practicegw/practice/readmodel"
)

// UpstreamState is what vendor adapters keep of the records they have
// seen, so that a vendor's change notification has a "before".
type UpstreamState interface {
	Last(ctx context.Context, key string) ([]byte, error)
	Save(ctx context.Context, key string, state []byte) error
	Forget(ctx context.Context, prefix string) error
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
	forget(t, st, other)
}

// forget checks that Forget removes every key under a prefix, past one
// page of a scan, and nothing else: not a key that only shares the
// prefix's beginning, nor one that matches it as a pattern would.
func forget(t *testing.T, st, other UpstreamState) {
	ctx := context.Background()
	const old = "xpm/seen/frm_acme/live/clients/"
	kept := []string{
		"xpm/seen/frm_acme/live/clientsX/1", // shares the prefix's beginning
		"xpm/seen/frm_acme2/live/clients/1", // another firm
		"xpm/seen/frm_acme/live/jobs/1",     // another kind
		"xpm/seen/frm_*/live/clients/1",     // a pattern's characters in a key
		"xpm/seen/frm_acme/live/clients",    // the prefix less its slash
		"karbon/frm_acme/work/1",
	}
	for _, k := range kept {
		if err := st.Save(ctx, k, []byte("kept")); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1200 {
		if err := st.Save(ctx, fmt.Sprintf("%scli_%04d", old, i), []byte(`{"d":"x"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if err := other.Forget(ctx, old); err != nil {
		t.Fatalf("forgetting %s: %v", old, err)
	}
	for _, i := range []int{0, 499, 500, 1199} {
		if got, err := st.Last(ctx, fmt.Sprintf("%scli_%04d", old, i)); err != nil || got != nil {
			t.Fatalf("cli_%04d after forgetting its prefix: %q, %v", i, got, err)
		}
	}
	for _, k := range kept {
		if got, err := st.Last(ctx, k); err != nil || string(got) != "kept" {
			t.Errorf("%s after forgetting %s: %q, %v; want it kept", k, old, got, err)
		}
	}
	// A prefix that is a pattern matches only itself.
	if err := st.Forget(ctx, "xpm/seen/frm_*/"); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Last(ctx, "xpm/seen/frm_acme2/live/clients/1"); string(got) != "kept" {
		t.Error("a prefix holding * forgot a key it does not begin")
	}
	if got, _ := st.Last(ctx, "xpm/seen/frm_*/live/clients/1"); got != nil {
		t.Error("a prefix holding * did not forget the key it begins")
	}
	if err := st.Forget(ctx, ""); err == nil {
		t.Error("forgetting every state (an empty prefix) was not refused")
	}
	if got, _ := st.Last(ctx, "karbon/frm_acme/work/1"); string(got) != "kept" {
		t.Error("an empty prefix forgot a state")
	}
}

// FencedUpstream is an upstream state store whose saves a fence guards.
type FencedUpstream interface {
	UpstreamState
	readmodel.FencedState
}

// UpstreamFences checks readmodel.FencedState: with no fence raised every
// generation saves; once the read model's fence is raised, a save of an
// older generation is ErrFenced with nothing saved, while the fence's
// generation saves. fences and st are one store's read model and
// upstream state.
func UpstreamFences(t *testing.T, open func(t *testing.T) (fences readmodel.Fencer, st FencedUpstream)) {
	ctx := context.Background()
	fences, st := open(t)
	old := readmodel.Fence{Firm: "frm_acme", Name: "con_1", Generation: 1}
	now := readmodel.Fence{Firm: "frm_acme", Name: "con_1", Generation: 2}
	const key = "xpm/seen/frm_acme/live/clients/cli_1"
	if err := st.SaveFenced(ctx, old, key, []byte("before")); err != nil {
		t.Fatalf("a save with no fence raised: %v", err)
	}
	if err := fences.RaiseFence(ctx, now); err != nil {
		t.Fatal(err)
	}
	if err := st.SaveFenced(ctx, old, key, []byte("stale")); !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("a save of the generation before the fence: %v, want ErrFenced", err)
	}
	if got, err := st.Last(ctx, key); err != nil || string(got) != "before" {
		t.Fatalf("after a fenced save: %q, %v; want what was saved before", got, err)
	}
	if err := st.SaveFenced(ctx, now, key, []byte("now")); err != nil {
		t.Fatalf("a save of the fence's generation: %v", err)
	}
	if err := st.SaveFenced(ctx, readmodel.Fence{Firm: "frm_other", Name: "con_1", Generation: 1}, key+"x", []byte("other")); err != nil {
		t.Fatalf("a save under another firm's fence: %v", err)
	}
	if got, err := st.Last(ctx, key); err != nil || string(got) != "now" {
		t.Fatalf("%q, %v; want now", got, err)
	}
}

// SwappingUpstream is an upstream state store that compares and saves
// in one step, under a fence or not.
type SwappingUpstream interface {
	FencedUpstream
	changes.Swapper
	readmodel.FencedSwapper
}

// UpstreamSwaps checks changes.Swapper and readmodel.FencedSwapper: a
// swap saves only over the state named (nothing, for a key never saved),
// what one handle swapped the other reads, writers on two handles that
// each read, work out and swap lose none of each other's writes, and a
// fenced swap of an older generation saves nothing. fences is the store's
// read model; a and b are two handles on its upstream state.
func UpstreamSwaps(t *testing.T, open func(t *testing.T) (fences readmodel.Fencer, a, b SwappingUpstream)) {
	ctx := context.Background()
	fences, a, b := open(t)
	const key = "stamps/frm_acme/live/jobs/job_1"
	swap := func(st SwappingUpstream, old, state string, want bool) {
		t.Helper()
		var o []byte
		if old != "" {
			o = []byte(old)
		}
		ok, err := st.Swap(ctx, key, o, []byte(state))
		if err != nil || ok != want {
			t.Fatalf("swap %q for %q: %t, %v; want %t", old, state, ok, err, want)
		}
	}
	swap(a, "x", "first", false) // nothing is kept yet
	swap(a, "", "first", true)
	swap(b, "", "again", false) // something is kept now
	swap(b, "other", "again", false)
	if got, err := b.Last(ctx, key); err != nil || string(got) != "first" {
		t.Fatalf("after refused swaps: %q, %v; want first", got, err)
	}
	swap(b, "first", "second", true)
	if got, err := a.Last(ctx, key); err != nil || string(got) != "second" {
		t.Fatalf("after a swap on the other handle: %q, %v; want second", got, err)
	}

	// Counters read, raised and swapped back on both handles at once:
	// every raise that reports its swap is kept.
	const counter = "stamps/frm_acme/live/jobs/job_2"
	const writers, raises = 4, 25
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for w := range writers {
		st := []SwappingUpstream{a, b}[w%2]
		wg.Go(func() {
			for done := 0; done < raises; {
				cur, err := st.Last(ctx, counter)
				if err != nil {
					errs <- err
					return
				}
				n := 0
				if cur != nil {
					n, _ = strconv.Atoi(string(cur))
				}
				ok, err := st.Swap(ctx, counter, cur, []byte(strconv.Itoa(n+1)))
				if err != nil {
					errs <- err
					return
				}
				if ok {
					done++
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got, err := a.Last(ctx, counter); err != nil || string(got) != strconv.Itoa(writers*raises) {
		t.Fatalf("after %d swapped raises: %q, %v", writers*raises, got, err)
	}

	old := readmodel.Fence{Firm: "frm_acme", Name: "con_1", Generation: 1}
	now := readmodel.Fence{Firm: "frm_acme", Name: "con_1", Generation: 2}
	if ok, err := a.SwapFenced(ctx, old, key, []byte("second"), []byte("third")); !ok || err != nil {
		t.Fatalf("a fenced swap with no fence raised: %t, %v", ok, err)
	}
	if err := fences.RaiseFence(ctx, now); err != nil {
		t.Fatal(err)
	}
	if ok, err := b.SwapFenced(ctx, old, key, []byte("third"), []byte("stale")); ok || !errors.Is(err, readmodel.ErrFenced) {
		t.Fatalf("a swap of the generation before the fence: %t, %v; want ErrFenced", ok, err)
	}
	if ok, err := b.SwapFenced(ctx, now, key, []byte("second"), []byte("stale")); ok || err != nil {
		t.Fatalf("a fenced swap over a state no longer kept: %t, %v; want refused", ok, err)
	}
	if ok, err := b.SwapFenced(ctx, now, key, []byte("third"), []byte("fourth")); !ok || err != nil {
		t.Fatalf("a swap of the fence's generation: %t, %v", ok, err)
	}
	if got, err := a.Last(ctx, key); err != nil || string(got) != "fourth" {
		t.Fatalf("%q, %v; want fourth", got, err)
	}
}
