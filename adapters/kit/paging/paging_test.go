package paging_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/practice"
)

// vendor is a paged vendor list of n items "i0".."i<n-1>" in pages of size,
// or a tree: items named "d..." are folders whose children are in kids.
type vendor struct {
	size    int
	lists   map[string][]string // folder -> children
	fetches int
}

func (v *vendor) fetch(_ context.Context, folder, token string) (paging.VendorPage[string], error) {
	v.fetches++
	off := 0
	if token != "" {
		off, _ = strconv.Atoi(token)
	}
	all := v.lists[folder]
	end := min(off+v.size, len(all))
	p := paging.VendorPage[string]{Items: all[off:end]}
	if end < len(all) {
		p.Next = strconv.Itoa(end)
	}
	return p, nil
}

func flat(n int) map[string][]string {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf("i%03d", i))
	}
	return map[string][]string{"": items}
}

func walk(v *vendor, match func(string) bool, maxPages int) *paging.Walk[string] {
	return &paging.Walk[string]{
		Fetch: v.fetch,
		ID:    func(s string) string { return s },
		Descend: func(s string) (string, string, bool) {
			return s, s, strings.HasPrefix(s, "d")
		},
		Match: match,
		Convert: func(_ context.Context, fs []paging.Found[string]) ([]json.RawMessage, error) {
			out := make([]json.RawMessage, len(fs))
			for i, f := range fs {
				out[i], _ = json.Marshal(f.Path + "/" + f.Item)
			}
			return out, nil
		},
		MaxPages: maxPages,
	}
}

// all pages through w and returns every item, checking the cursor on the
// way.
func all(t *testing.T, w *paging.Walk[string], limit int) ([]string, int) {
	t.Helper()
	var got []string
	cur := ""
	pages := 0
	for {
		c, err := paging.DecodeCursor(cur)
		if err != nil {
			t.Fatal(err)
		}
		p, err := w.Collect(context.Background(), paging.Frame{}, c, limit)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(p.Items) > limit {
			t.Fatalf("page of %d items, limit %d", len(p.Items), limit)
		}
		for _, raw := range p.Items {
			var s string
			json.Unmarshal(raw, &s)
			got = append(got, s)
		}
		if !p.HasMore {
			if p.Next != "" {
				t.Fatal("a last page with a next cursor")
			}
			return got, pages
		}
		if p.Next == "" {
			t.Fatal("has_more without a cursor")
		}
		cur = p.Next
		if pages > 1000 {
			t.Fatal("paging does not end")
		}
	}
}

func TestWalkFlatAcrossVendorPages(t *testing.T) {
	even := func(s string) bool { n, _ := strconv.Atoi(s[1:]); return n%2 == 0 }
	rare := func(s string) bool { return s == "i003" || s == "i250" }
	cases := []struct {
		name     string
		n, size  int
		limit    int
		match    func(string) bool
		maxPages int
		want     int
	}{
		{"limit below a vendor page", 250, 100, 30, nil, 10, 250},
		{"limit above a vendor page", 250, 100, 150, nil, 10, 250},
		{"filter across page boundaries", 250, 100, 40, even, 10, 125},
		{"sparse filter, bounded scan", 300, 10, 5, rare, 3, 2},
		{"empty vendor", 0, 100, 10, nil, 10, 0},
		{"exact multiple", 200, 100, 50, nil, 10, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := &vendor{size: tc.size, lists: flat(tc.n)}
			got, _ := all(t, walk(v, tc.match, tc.maxPages), tc.limit)
			if len(got) != tc.want {
				t.Fatalf("got %d items, want %d", len(got), tc.want)
			}
			seen := map[string]bool{}
			for i, s := range got {
				if seen[s] {
					t.Fatalf("%s twice", s)
				}
				seen[s] = true
				if i > 0 && got[i-1] > s {
					t.Fatalf("out of order at %d", i)
				}
			}
		})
	}
}

func TestWalkBoundedScanSaysSo(t *testing.T) {
	v := &vendor{size: 10, lists: flat(100)}
	w := walk(v, func(s string) bool { return s == "i095" }, 2)
	p, err := w.Collect(context.Background(), paging.Frame{}, paging.Cursor{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Items) != 0 || !p.HasMore || p.Next == "" {
		t.Fatalf("page = %d items, has_more %v: a bounded scan must say there is more", len(p.Items), p.HasMore)
	}
	if v.fetches != 2 {
		t.Fatalf("fetched %d vendor pages, bound 2", v.fetches)
	}
}

func TestWalkTree(t *testing.T) {
	v := &vendor{size: 2, lists: map[string][]string{
		"":    {"a", "dx", "b", "dy"},
		"dx":  {"c", "dxz", "f"},
		"dxz": {"e"},
		"dy":  {},
	}}
	for _, limit := range []int{1, 2, 3, 10} {
		v.fetches = 0
		got, _ := all(t, walk(v, nil, 10), limit)
		want := "/a /dx/c /dx/dxz/e /dx/f /b"
		if strings.Join(got, " ") != want {
			t.Fatalf("limit %d: got %v, want %s", limit, got, want)
		}
	}
}

func TestWalkFindsItsPlaceAfterInserts(t *testing.T) {
	v := &vendor{size: 10, lists: flat(30)}
	w := walk(v, nil, 10)
	p, _ := w.Collect(context.Background(), paging.Frame{}, paging.Cursor{}, 5)
	cur, _ := paging.DecodeCursor(p.Next)
	// Two records appear before the cursor's place meanwhile.
	v.lists[""] = append([]string{"a", "b"}, v.lists[""]...)
	p, _ = w.Collect(context.Background(), paging.Frame{}, cur, 3)
	var first string
	json.Unmarshal(p.Items[0], &first)
	if first != "/i005" {
		t.Fatalf("resumed at %s, want /i005", first)
	}
}

func TestDecodeCursorRefusesGarbage(t *testing.T) {
	for _, s := range []string{"x", "u1.", "u1.!!!", "u1." + "e30", "u1.eyJzIjpbeyJpIjotMX1dfQ"} {
		_, err := paging.DecodeCursor(s)
		var inv *practice.InvalidError
		if !errors.As(err, &inv) || inv.Code != "invalid_cursor" {
			t.Errorf("%q: err = %v", s, err)
		}
	}
	c := paging.Cursor{Stack: []paging.Frame{{Folder: "f", Path: "/a b", Page: "/drives/x?$skiptoken=1", Index: 3, Last: "id:1"}}}
	got, err := paging.DecodeCursor(c.Encode())
	if err != nil || got.Stack[0] != c.Stack[0] {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
}

func FuzzDecodeCursor(f *testing.F) {
	f.Add(paging.Cursor{Stack: []paging.Frame{{Page: "100", Index: 2, Last: "x"}}}.Encode())
	f.Add("u1.garbage")
	f.Fuzz(func(t *testing.T, s string) {
		c, err := paging.DecodeCursor(s)
		if err == nil && s != "" && len(c.Stack) == 0 {
			t.Fatal("accepted a cursor with no position")
		}
	})
}

func TestParallel(t *testing.T) {
	var n atomic.Int64
	err := paging.Parallel(context.Background(), 3, 20, func(ctx context.Context, i int) error {
		n.Add(1)
		return nil
	})
	if err != nil || n.Load() != 20 {
		t.Fatalf("ran %d, err %v", n.Load(), err)
	}
	boom := errors.New("boom")
	err = paging.Parallel(context.Background(), 3, 20, func(ctx context.Context, i int) error {
		if i == 4 {
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
}

// A vendor whose next link repeats a page (itself, or one two pages back)
// ends the walk with an error the API answers as 502, after reading each
// page once, even when no item matches the filter; a cancelled request
// stops the walk before it reads anything.
func TestWalkEndsOnARepeatingNextLink(t *testing.T) {
	for _, tc := range []struct {
		name string
		next map[string]string // page token -> its next link
	}{
		{"next link to itself", map[string]string{"": "p1", "p1": "p1"}},
		{"cycle of two", map[string]string{"": "p1", "p1": "p2", "p2": "p1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fetches := 0
			w := &paging.Walk[string]{
				Fetch: func(_ context.Context, _, token string) (paging.VendorPage[string], error) {
					fetches++
					return paging.VendorPage[string]{Items: []string{"x" + token}, Next: tc.next[token]}, nil
				},
				ID:       func(s string) string { return s },
				Match:    func(string) bool { return false },
				Convert:  func(context.Context, []paging.Found[string]) ([]json.RawMessage, error) { return nil, nil },
				MaxPages: 1000,
			}
			_, err := w.Collect(context.Background(), paging.Frame{}, paging.Cursor{}, 10)
			var cycle *paging.CycleError
			if !errors.As(err, &cycle) || !errors.Is(err, practice.ErrBadUpstream) {
				t.Fatalf("error %v, want a CycleError that is practice.ErrBadUpstream", err)
			}
			if fetches != len(tc.next) {
				t.Fatalf("read %d vendor pages, want each of the %d once", fetches, len(tc.next))
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	v := &vendor{size: 10, lists: flat(100)}
	if _, err := walk(v, nil, 10).Collect(ctx, paging.Frame{}, paging.Cursor{}, 10); !errors.Is(err, context.Canceled) || v.fetches != 0 {
		t.Fatalf("a cancelled walk: %v after %d fetches, want context.Canceled before any", err, v.fetches)
	}
}

// All, the walk over a whole listing (an adapter's look at every record
// at start-up), reads every item once, ends with a 502's error when a
// next link repeats, after reading each page once, and stops as soon as
// its context does.
func TestAllReadsEverythingOnceAndEndsOnARepeatingNextLink(t *testing.T) {
	v := &vendor{size: 7, lists: flat(50)}
	var got []string
	err := paging.All(context.Background(), func(ctx context.Context, token string) (paging.VendorPage[string], error) {
		return v.fetch(ctx, "", token)
	}, func(_ context.Context, s string) error { got = append(got, s); return nil })
	if err != nil || len(got) != 50 || got[49] != "i049" || v.fetches != 8 {
		t.Fatalf("read %d items in %d pages, err %v", len(got), v.fetches, err)
	}

	for _, tc := range []struct {
		name string
		next map[string]string
	}{
		{"next link to itself", map[string]string{"": "p1", "p1": "p1"}},
		{"cycle of two", map[string]string{"": "p1", "p1": "p2", "p2": "p1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fetches := 0
			err := paging.All(context.Background(), func(_ context.Context, token string) (paging.VendorPage[string], error) {
				fetches++
				return paging.VendorPage[string]{Items: []string{"x" + token}, Next: tc.next[token]}, nil
			}, func(context.Context, string) error { return nil })
			var cycle *paging.CycleError
			if !errors.As(err, &cycle) || !errors.Is(err, practice.ErrBadUpstream) {
				t.Fatalf("error %v, want a CycleError that is practice.ErrBadUpstream", err)
			}
			if fetches != len(tc.next) {
				t.Fatalf("read %d vendor pages, want each of the %d once", fetches, len(tc.next))
			}
		})
	}

	ctx, cancel := context.WithCancel(context.Background())
	fetches := 0
	err = paging.All(ctx, func(_ context.Context, token string) (paging.VendorPage[string], error) {
		fetches++
		return paging.VendorPage[string]{Items: []string{"x"}, Next: token + "x"}, nil // never ends by itself
	}, func(context.Context, string) error {
		if fetches == 3 {
			cancel()
		}
		return nil
	})
	if !errors.Is(err, context.Canceled) || fetches != 3 {
		t.Fatalf("a cancelled walk: %v after %d pages, want context.Canceled after 3", err, fetches)
	}
}

// A page of ours says how many items the vendor's listing holds in all,
// when the vendor says.
func TestWalkCarriesTheVendorsTotal(t *testing.T) {
	v := &vendor{size: 100, lists: flat(250)}
	w := walk(v, nil, 10)
	fetch := w.Fetch
	w.Fetch = func(ctx context.Context, folder, token string) (paging.VendorPage[string], error) {
		p, err := fetch(ctx, folder, token)
		p.Total = 250
		return p, err
	}
	p, err := w.Collect(context.Background(), paging.Frame{}, paging.Cursor{}, 30)
	if err != nil || p.Total != 250 || !p.HasMore {
		t.Fatalf("first page: total %d, has more %v, %v", p.Total, p.HasMore, err)
	}
	if p, _ := walk(&vendor{size: 100, lists: flat(250)}, nil, 10).Collect(context.Background(), paging.Frame{}, paging.Cursor{}, 30); p.Total != 0 {
		t.Fatalf("a vendor that gives no total: %d", p.Total)
	}
}

// A record whose vendor answer cannot be used is left out of its page and
// named there, and the walk goes on with the rest across the vendor's
// pages; any other failure fails the page.
func TestWalkLeavesOutWhatItCannotUse(t *testing.T) {
	v := &vendor{size: 10, lists: flat(25)}
	w := walk(v, nil, 10)
	w.Convert = func(ctx context.Context, fs []paging.Found[string]) ([]json.RawMessage, error) {
		return paging.Each(ctx, 4, len(fs), func(_ context.Context, i int) (json.RawMessage, error) {
			switch fs[i].Item {
			case "i007", "i018":
				return nil, practice.Unusable(practice.Invoices, "inv_"+fs[i].Item, "its payment",
					fmt.Errorf("GET /payments/p: %w", practice.ErrNotFound))
			case "i011":
				return nil, nil // dropped: a filter the vendor item could not answer
			}
			return json.Marshal(fs[i].Item)
		})
	}
	p, err := w.Collect(context.Background(), paging.Frame{}, paging.Cursor{}, 100)
	if err != nil || len(p.Items) != 22 || len(p.Unusable) != 2 || p.Unusable[0].ID != "inv_i007" || p.Unusable[1].ID != "inv_i018" {
		t.Fatalf("%d items, unusable %v, %v", len(p.Items), p.Unusable, err)
	}
	if u := p.Unusable[0]; !errors.Is(u, practice.ErrBadUpstream) || errors.Is(u, practice.ErrNotFound) ||
		u.Reason() != "the vendor does not have its payment" {
		t.Fatalf("an unusable record is %v (%s): a bad upstream answer, never a not-found", u, u.Reason())
	}
	down := fmt.Errorf("503: %w", practice.ErrUnavailable)
	w.Convert = func(ctx context.Context, fs []paging.Found[string]) ([]json.RawMessage, error) {
		return paging.Each(ctx, 4, len(fs), func(_ context.Context, i int) (json.RawMessage, error) {
			return nil, practice.Unusable(practice.Invoices, "inv_"+fs[i].Item, "its payment", down)
		})
	}
	if _, err := w.Collect(context.Background(), paging.Frame{}, paging.Cursor{}, 100); !errors.Is(err, practice.ErrUnavailable) {
		t.Fatalf("the vendor down for a detail read: %v, want the page failed", err)
	}
}
