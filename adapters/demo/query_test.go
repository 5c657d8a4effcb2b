package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters"
)

func TestPagingReturnsEveryRecordOnce(t *testing.T) {
	r, _ := openAcme(t)
	for _, k := range adapters.Kinds {
		for _, limit := range []int{7, 50, 200} {
			t.Run(fmt.Sprintf("%s/limit=%d", k, limit), func(t *testing.T) {
				want := len((*r.tenants.Load())[acme].col(k))
				var ids []string
				q := adapters.Query{Limit: limit}
				for {
					p, err := r.List(ctx, acme, k, q)
					if err != nil {
						t.Fatal(err)
					}
					if len(p.Items) > limit || p.HasMore && len(p.Items) != limit {
						t.Fatalf("page of %d items with limit %d, has_more %v", len(p.Items), limit, p.HasMore)
					}
					for _, raw := range p.Items {
						ids = append(ids, idOf(t, raw))
					}
					if !p.HasMore {
						if p.Next != "" {
							t.Errorf("last page has next %q", p.Next)
						}
						break
					}
					if p.Next != ids[len(ids)-1] {
						t.Fatalf("next %q, last id %q", p.Next, ids[len(ids)-1])
					}
					q.Cursor = p.Next
				}
				if len(ids) != want {
					t.Errorf("%d ids, want %d", len(ids), want)
				}
				for i := 1; i < len(ids); i++ {
					if ids[i] <= ids[i-1] || !strings.HasPrefix(ids[i], k.IDPrefix()) {
						t.Fatalf("id %d: %s after %s", i, ids[i], ids[i-1])
					}
				}
			})
		}
	}
}

// TestPagingIsStableUnderConcurrentWrites pages while another goroutine
// creates, edits and moves records. Every record that existed when paging
// began must be seen exactly once, in order, whether new ids land after the
// seed or among it (a clock behind the seed's times).
func TestPagingIsStableUnderConcurrentWrites(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start time.Time
	}{
		{"new ids after the seed", clockStart},
		{"new ids among the seed", time.Date(2025, 6, 2, 9, 0, 0, 0, time.UTC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := newClock(tc.start)
			r := openRecords(t, openDB(t, t.TempDir()), []string{"frm_acme"}, WithClock(clock.Now))
			paged := []struct {
				tenant adapters.Tenant
				kind   adapters.Kind
			}{
				{acme, adapters.Clients}, {acme, adapters.Jobs},
				{acmeSandbox, adapters.Engagements}, {acmeSandbox, adapters.Jobs}, {acmeSandbox, adapters.Documents},
			}
			existing := make([][]string, len(paged))
			for i, p := range paged {
				for _, raw := range all(t, r, p.tenant, p.kind, adapters.Filter{}, 200) {
					existing[i] = append(existing[i], idOf(t, raw))
				}
			}
			clients, jobs := existing[0], existing[1]

			wctx, stop := context.WithCancel(ctx)
			var (
				wg     sync.WaitGroup
				writes atomic.Int64
				failed atomic.Bool
				werr   error
			)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; wctx.Err() == nil; i++ {
					var err error
					switch i % 6 {
					case 0:
						_, err = r.CreateClient(ctx, acme, adapters.ClientInput{Name: ptr(fmt.Sprintf("Writer %d Ltd", i))})
					case 1:
						_, err = r.UpdateClient(ctx, acme, clients[i%len(clients)], adapters.ClientInput{Phone: ptr("+44 20 7946 0999")})
					case 2:
						_, err = r.CreateJob(ctx, acme, adapters.JobInput{Title: ptr("Bookkeeping"), Client: &clients[i%len(clients)]})
					case 3:
						_, err = r.MoveJob(ctx, acme, jobs[i%len(jobs)], adapters.StageMove{Stage: adapters.JobStages[i%len(adapters.JobStages)]})
					case 4:
						_, err = r.Trigger(ctx, "frm_acme", "engagement.signed")
					case 5:
						_, err = r.Trigger(ctx, "frm_acme", "document.filed")
					}
					if err != nil {
						werr = err
						failed.Store(true)
						return
					}
					writes.Add(1)
				}
			}()

			for i, p := range paged {
				var ids []string
				q := adapters.Query{Limit: 10}
				for {
					// Let at least one write land between pages.
					for w := writes.Load(); writes.Load() == w && !failed.Load(); {
						runtime.Gosched()
					}
					page, err := r.List(ctx, p.tenant, p.kind, q)
					if err != nil {
						t.Fatal(err)
					}
					for _, raw := range page.Items {
						ids = append(ids, idOf(t, raw))
					}
					if !page.HasMore {
						break
					}
					q.Cursor = page.Next
				}
				for j := 1; j < len(ids); j++ {
					if ids[j] <= ids[j-1] {
						t.Fatalf("%s %s: %s after %s", p.tenant, p.kind, ids[j], ids[j-1])
					}
				}
				for _, id := range existing[i] {
					if _, found := slices.BinarySearch(ids, id); !found {
						t.Fatalf("%s %s: %s skipped", p.tenant, p.kind, id)
					}
				}
			}
			stop()
			wg.Wait()
			if werr != nil {
				t.Fatal(werr)
			}
			t.Logf("%d writes while paging", writes.Load())
		})
	}
}

func TestFilters(t *testing.T) {
	r, _ := openAcme(t)
	clients := decodeAll[adapters.Client](t, all(t, r, acme, adapters.Clients, adapters.Filter{}, 200))
	jobs := decodeAll[adapters.Job](t, all(t, r, acme, adapters.Jobs, adapters.Filter{}, 200))
	invoices := decodeAll[adapters.Invoice](t, all(t, r, acme, adapters.Invoices, adapters.Filter{}, 200))

	// A job with no deadline matches no deadline range.
	undated, err := r.CreateJob(ctx, acme, adapters.JobInput{Title: ptr("Ad hoc advice"), Client: &clients[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	jobs = append(jobs, decodeAll[adapters.Job](t, []json.RawMessage{undated})...)

	type filterCase struct {
		name   string
		kind   adapters.Kind
		filter adapters.Filter
		want   []string
	}
	clientCase := func(name string, f adapters.Filter, keep func(c adapters.Client) bool) filterCase {
		fc := filterCase{name: name, kind: adapters.Clients, filter: f}
		for _, c := range clients {
			if keep(c) {
				fc.want = append(fc.want, c.ID)
			}
		}
		return fc
	}
	jobCase := func(name string, f adapters.Filter, keep func(j adapters.Job) bool) filterCase {
		fc := filterCase{name: name, kind: adapters.Jobs, filter: f}
		for _, j := range jobs {
			if keep(j) {
				fc.want = append(fc.want, j.ID)
			}
		}
		return fc
	}

	owner, activity := clients[3].Owner, clients[10].LastActivityAt
	from, to := seedBase.AddDate(0, -6, 0), seedBase.AddDate(0, -2, 0)
	jobOwner, jobClient, deadline := jobs[7].Owner, jobs[5].Client, jobs[9].Deadline
	since := seedBase.AddDate(0, -1, 0)
	cases := []filterCase{
		clientCase("owner", adapters.Filter{Owner: owner}, func(c adapters.Client) bool { return c.Owner == owner }),
		clientCase("status", adapters.Filter{Status: "inactive"}, func(c adapters.Client) bool { return c.Status == "inactive" }),
		clientCase("last activity after", adapters.Filter{LastActivityAfter: from}, func(c adapters.Client) bool { return !c.LastActivityAt.Before(from) }),
		clientCase("last activity before", adapters.Filter{LastActivityBefore: to}, func(c adapters.Client) bool { return !c.LastActivityAt.After(to) }),
		clientCase("last activity between", adapters.Filter{LastActivityAfter: from, LastActivityBefore: to}, func(c adapters.Client) bool {
			return !c.LastActivityAt.Before(from) && !c.LastActivityAt.After(to)
		}),
		clientCase("last activity bounds are inclusive", adapters.Filter{LastActivityAfter: activity, LastActivityBefore: activity}, func(c adapters.Client) bool {
			return c.LastActivityAt.Equal(activity)
		}),
		clientCase("owner and status", adapters.Filter{Owner: owner, Status: "active"}, func(c adapters.Client) bool { return c.Owner == owner && c.Status == "active" }),
		clientCase("updated since", adapters.Filter{UpdatedSince: since}, func(c adapters.Client) bool { return !c.UpdatedAt.Before(since) }),
		jobCase("stage", adapters.Filter{Stage: "in_review"}, func(j adapters.Job) bool { return j.Stage == "in_review" }),
		jobCase("owner", adapters.Filter{Owner: jobOwner}, func(j adapters.Job) bool { return j.Owner == jobOwner }),
		jobCase("client", adapters.Filter{Client: jobClient}, func(j adapters.Job) bool { return j.Client == jobClient }),
		jobCase("deadline after", adapters.Filter{DeadlineAfter: "2026-06-01"}, func(j adapters.Job) bool { return j.Deadline != "" && j.Deadline >= "2026-06-01" }),
		jobCase("deadline before", adapters.Filter{DeadlineBefore: "2025-12-31"}, func(j adapters.Job) bool { return j.Deadline != "" && j.Deadline <= "2025-12-31" }),
		jobCase("deadline bounds are inclusive", adapters.Filter{DeadlineAfter: deadline, DeadlineBefore: deadline}, func(j adapters.Job) bool { return j.Deadline == deadline }),
		jobCase("stage and owner", adapters.Filter{Stage: "completed", Owner: jobOwner}, func(j adapters.Job) bool { return j.Stage == "completed" && j.Owner == jobOwner }),
		jobCase("updated since", adapters.Filter{UpdatedSince: since}, func(j adapters.Job) bool { return !j.UpdatedAt.Before(since) }),
		{name: "invoices updated since", kind: adapters.Invoices, filter: adapters.Filter{UpdatedSince: since}, want: func() (ids []string) {
			for _, inv := range invoices {
				if !inv.UpdatedAt.Before(since) {
					ids = append(ids, inv.ID)
				}
			}
			return ids
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.kind.Singular()+" "+tc.name, func(t *testing.T) {
			total := len((*r.tenants.Load())[acme].col(tc.kind))
			if len(tc.want) == 0 || len(tc.want) == total {
				t.Fatalf("the filter keeps %d of %d records; pick a value that tells", len(tc.want), total)
			}
			var got []string
			for _, raw := range all(t, r, acme, tc.kind, tc.filter, 13) {
				got = append(got, idOf(t, raw))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %d ids, want %d\ngot  %v\nwant %v", len(got), len(tc.want), got, tc.want)
			}
		})
	}

	t.Run("nothing matches", func(t *testing.T) {
		p, err := r.List(ctx, acme, adapters.Jobs, adapters.Query{Filter: adapters.Filter{Owner: "usr_nobody"}, Limit: 50})
		if err != nil || p.Items == nil || len(p.Items) != 0 || p.HasMore || p.Next != "" {
			t.Errorf("page %+v, %v; want an empty, non-nil page", p, err)
		}
	})
}

func TestGetIsolatesTenants(t *testing.T) {
	r, _ := openAcme(t)
	acmeClient := idOf(t, all(t, r, acme, adapters.Clients, adapters.Filter{}, 1)[0])
	sandboxClient := idOf(t, all(t, r, acmeSandbox, adapters.Clients, adapters.Filter{}, 1)[0])
	acmeJob := idOf(t, all(t, r, acme, adapters.Jobs, adapters.Filter{}, 1)[0])

	if raw, err := r.Get(ctx, acme, adapters.Clients, acmeClient); err != nil || idOf(t, raw) != acmeClient {
		t.Fatalf("Get own client: %s, %v", raw, err)
	}
	for _, tc := range []struct {
		name   string
		tenant adapters.Tenant
		kind   adapters.Kind
		id     string
	}{
		{"another firm's client", birch, adapters.Clients, acmeClient},
		{"a live client from the sandbox", acmeSandbox, adapters.Clients, acmeClient},
		{"a sandbox client from live", acme, adapters.Clients, sandboxClient},
		{"a job as a client", acme, adapters.Clients, acmeJob},
		{"a malformed id", acme, adapters.Clients, "cli_nope"},
		{"an unknown firm", adapters.Tenant{Firm: "frm_unknown"}, adapters.Clients, acmeClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := r.Get(ctx, tc.tenant, tc.kind, tc.id); !errors.Is(err, adapters.ErrNotFound) {
				t.Errorf("err = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestInvalidCursor(t *testing.T) {
	r, _ := openAcme(t)
	client := idOf(t, all(t, r, acme, adapters.Clients, adapters.Filter{}, 1)[0])
	ulid := strings.TrimPrefix(client, "cli_")
	for _, cursor := range []string{
		"garbage",
		client,              // another kind's id
		"job_" + ulid[:25],  // too short
		"job_" + ulid + "0", // too long
		"job_" + strings.ToUpper(ulid),
		"job_8" + ulid[1:],       // beyond 128 bits
		"job_" + ulid[:25] + "u", // not Crockford
		"cur_" + ulid,            // the API's wrapping, not ours
	} {
		_, err := r.List(ctx, acme, adapters.Jobs, adapters.Query{Cursor: cursor, Limit: 10})
		var inv *adapters.InvalidError
		if !errors.As(err, &inv) || inv.Code != "invalid_cursor" || inv.Param != "cursor" {
			t.Errorf("cursor %q: err = %v, want invalid_cursor", cursor, err)
		}
	}
	// A well-formed id that is not in the collection is still a position.
	if _, err := r.List(ctx, acme, adapters.Jobs, adapters.Query{Cursor: "job_" + ulid, Limit: 10}); err != nil {
		t.Errorf("well-formed cursor: %v", err)
	}
}

func TestListUnknownKindOrFirm(t *testing.T) {
	r, _ := openAcme(t)
	if _, err := r.List(ctx, acme, adapters.Kind("widgets"), adapters.Query{}); err == nil {
		t.Error("listing an unknown kind succeeded")
	}
	if _, err := r.List(ctx, adapters.Tenant{Firm: "frm_unknown"}, adapters.Jobs, adapters.Query{}); !errors.Is(err, adapters.ErrNotFound) {
		t.Errorf("unknown firm: %v", err)
	}
}

func BenchmarkListJobs50(b *testing.B) {
	r, _ := openAcme(b)
	jobs := all(b, r, acme, adapters.Jobs, adapters.Filter{}, 200)
	middle := idOf(b, jobs[len(jobs)/2])
	for _, bc := range []struct {
		name string
		q    adapters.Query
	}{
		{"first_page", adapters.Query{Limit: 50}},
		{"after_cursor", adapters.Query{Limit: 50, Cursor: middle}},
		{"stage_filter", adapters.Query{Limit: 50, Filter: adapters.Filter{Stage: "in_progress"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := r.List(ctx, acme, adapters.Jobs, bc.q)
				if err != nil || len(p.Items) != 50 {
					b.Fatalf("%d items, %v", len(p.Items), err)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
