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

	"github.com/practicegw/practicegw/practice"
)

func TestPagingReturnsEveryRecordOnce(t *testing.T) {
	r, _ := openAcme(t)
	for _, k := range practice.Kinds {
		for _, limit := range []int{7, 50, 200} {
			t.Run(fmt.Sprintf("%s/limit=%d", k, limit), func(t *testing.T) {
				want := len(loadedTenant(t, r, acme).col(k))
				var ids []string
				q := practice.Query{Limit: limit}
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
			r := openRecords(t, openDB(t, t.TempDir()), []string{"frm_acme"}, withClock(clock.Now))
			paged := []struct {
				tenant practice.Tenant
				kind   practice.Kind
			}{
				{acme, practice.Clients}, {acme, practice.Jobs},
				{acmeSandbox, practice.Engagements}, {acmeSandbox, practice.Jobs}, {acmeSandbox, practice.Documents},
			}
			existing := make([][]string, len(paged))
			for i, p := range paged {
				for _, raw := range all(t, r, p.tenant, p.kind, practice.Filter{}, 200) {
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
						_, err = r.CreateClient(ctx, acme, practice.ClientInput{Name: ptr(fmt.Sprintf("Writer %d Ltd", i))})
					case 1:
						_, err = r.UpdateClient(ctx, acme, clients[i%len(clients)], practice.ClientInput{Phone: ptr("+44 20 7946 0999")})
					case 2:
						_, err = r.CreateJob(ctx, acme, practice.JobInput{Title: ptr("Bookkeeping"), Client: &clients[i%len(clients)]})
					case 3:
						_, err = r.MoveJob(ctx, acme, jobs[i%len(jobs)], practice.StageMove{Stage: practice.JobStages[i%len(practice.JobStages)]})
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
				q := practice.Query{Limit: 10}
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
	clients := decodeAll[practice.Client](t, all(t, r, acme, practice.Clients, practice.Filter{}, 200))
	jobs := decodeAll[practice.Job](t, all(t, r, acme, practice.Jobs, practice.Filter{}, 200))
	invoices := decodeAll[practice.Invoice](t, all(t, r, acme, practice.Invoices, practice.Filter{}, 200))

	// A job with no deadline matches no deadline range.
	undated, err := r.CreateJob(ctx, acme, practice.JobInput{Title: ptr("Ad hoc advice"), Client: &clients[0].ID})
	if err != nil {
		t.Fatal(err)
	}
	jobs = append(jobs, decodeAll[practice.Job](t, []json.RawMessage{undated})...)

	type filterCase struct {
		name   string
		kind   practice.Kind
		filter practice.Filter
		want   []string
	}
	clientCase := func(name string, f practice.Filter, keep func(c practice.Client) bool) filterCase {
		fc := filterCase{name: name, kind: practice.Clients, filter: f}
		for _, c := range clients {
			if keep(c) {
				fc.want = append(fc.want, c.ID)
			}
		}
		return fc
	}
	jobCase := func(name string, f practice.Filter, keep func(j practice.Job) bool) filterCase {
		fc := filterCase{name: name, kind: practice.Jobs, filter: f}
		for _, j := range jobs {
			if keep(j) {
				fc.want = append(fc.want, j.ID)
			}
		}
		return fc
	}

	owner, activity := practice.ValueOf(clients[3].Owner), clients[10].LastActivityAt
	from, to := seedBase.AddDate(0, -6, 0), seedBase.AddDate(0, -2, 0)
	jobOwner, jobClient, deadline := practice.ValueOf(jobs[7].Owner), practice.ValueOf(jobs[5].Client), jobs[9].Deadline
	since := seedBase.AddDate(0, -1, 0)
	cases := []filterCase{
		clientCase("owner", practice.Filter{Owner: owner}, func(c practice.Client) bool { return practice.ValueOf(c.Owner) == owner }),
		clientCase("status", practice.Filter{Status: "inactive"}, func(c practice.Client) bool { return c.Status == "inactive" }),
		clientCase("last activity after", practice.Filter{LastActivityAfter: from}, func(c practice.Client) bool { return !c.LastActivityAt.Before(from) }),
		clientCase("last activity before", practice.Filter{LastActivityBefore: to}, func(c practice.Client) bool { return !c.LastActivityAt.After(to) }),
		clientCase("last activity between", practice.Filter{LastActivityAfter: from, LastActivityBefore: to}, func(c practice.Client) bool {
			return !c.LastActivityAt.Before(from) && !c.LastActivityAt.After(to)
		}),
		clientCase("last activity bounds are inclusive", practice.Filter{LastActivityAfter: activity, LastActivityBefore: activity}, func(c practice.Client) bool {
			return c.LastActivityAt.Equal(activity)
		}),
		clientCase("owner and status", practice.Filter{Owner: owner, Status: "active"}, func(c practice.Client) bool { return practice.ValueOf(c.Owner) == owner && c.Status == "active" }),
		clientCase("updated since", practice.Filter{UpdatedSince: since}, func(c practice.Client) bool { return !c.UpdatedAt.Before(since) }),
		jobCase("stage", practice.Filter{Stage: "in_review"}, func(j practice.Job) bool { return j.Stage == "in_review" }),
		jobCase("owner", practice.Filter{Owner: jobOwner}, func(j practice.Job) bool { return practice.ValueOf(j.Owner) == jobOwner }),
		jobCase("client", practice.Filter{Client: jobClient}, func(j practice.Job) bool { return practice.ValueOf(j.Client) == jobClient }),
		jobCase("deadline after", practice.Filter{DeadlineAfter: "2026-06-01"}, func(j practice.Job) bool { return j.Deadline != "" && j.Deadline >= "2026-06-01" }),
		jobCase("deadline before", practice.Filter{DeadlineBefore: "2025-12-31"}, func(j practice.Job) bool { return j.Deadline != "" && j.Deadline <= "2025-12-31" }),
		jobCase("deadline bounds are inclusive", practice.Filter{DeadlineAfter: deadline, DeadlineBefore: deadline}, func(j practice.Job) bool { return j.Deadline == deadline }),
		jobCase("stage and owner", practice.Filter{Stage: "completed", Owner: jobOwner}, func(j practice.Job) bool { return j.Stage == "completed" && practice.ValueOf(j.Owner) == jobOwner }),
		jobCase("updated since", practice.Filter{UpdatedSince: since}, func(j practice.Job) bool { return !j.UpdatedAt.Before(since) }),
		{name: "invoices updated since", kind: practice.Invoices, filter: practice.Filter{UpdatedSince: since}, want: func() (ids []string) {
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
			total := len(loadedTenant(t, r, acme).col(tc.kind))
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
		p, err := r.List(ctx, acme, practice.Jobs, practice.Query{Filter: practice.Filter{Owner: "usr_nobody"}, Limit: 50})
		if err != nil || p.Items == nil || len(p.Items) != 0 || p.HasMore || p.Next != "" {
			t.Errorf("page %+v, %v; want an empty, non-nil page", p, err)
		}
	})
}

func TestGetIsolatesTenants(t *testing.T) {
	r, _ := openAcme(t)
	acmeClient := idOf(t, all(t, r, acme, practice.Clients, practice.Filter{}, 1)[0])
	sandboxClient := idOf(t, all(t, r, acmeSandbox, practice.Clients, practice.Filter{}, 1)[0])
	acmeJob := idOf(t, all(t, r, acme, practice.Jobs, practice.Filter{}, 1)[0])

	if raw, err := r.Get(ctx, acme, practice.Clients, acmeClient); err != nil || idOf(t, raw) != acmeClient {
		t.Fatalf("Get own client: %s, %v", raw, err)
	}
	for _, tc := range []struct {
		name   string
		tenant practice.Tenant
		kind   practice.Kind
		id     string
	}{
		{"another firm's client", birch, practice.Clients, acmeClient},
		{"a live client from the sandbox", acmeSandbox, practice.Clients, acmeClient},
		{"a sandbox client from live", acme, practice.Clients, sandboxClient},
		{"a job as a client", acme, practice.Clients, acmeJob},
		{"a malformed id", acme, practice.Clients, "cli_nope"},
		{"an unknown firm", practice.Tenant{Firm: "frm_unknown"}, practice.Clients, acmeClient},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := r.Get(ctx, tc.tenant, tc.kind, tc.id); !errors.Is(err, practice.ErrNotFound) {
				t.Errorf("err = %v, want ErrNotFound", err)
			}
		})
	}
}

func TestInvalidCursor(t *testing.T) {
	r, _ := openAcme(t)
	client := idOf(t, all(t, r, acme, practice.Clients, practice.Filter{}, 1)[0])
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
		_, err := r.List(ctx, acme, practice.Jobs, practice.Query{Cursor: cursor, Limit: 10})
		var inv *practice.InvalidError
		if !errors.As(err, &inv) || inv.Code != "invalid_cursor" || inv.Param != "cursor" {
			t.Errorf("cursor %q: err = %v, want invalid_cursor", cursor, err)
		}
	}
	// A well-formed id that is not in the collection is still a position.
	if _, err := r.List(ctx, acme, practice.Jobs, practice.Query{Cursor: "job_" + ulid, Limit: 10}); err != nil {
		t.Errorf("well-formed cursor: %v", err)
	}
}

func TestListUnknownKindOrFirm(t *testing.T) {
	r, _ := openAcme(t)
	if _, err := r.List(ctx, acme, practice.Kind("widgets"), practice.Query{}); err == nil {
		t.Error("listing an unknown kind succeeded")
	}
	if _, err := r.List(ctx, practice.Tenant{Firm: "frm_unknown"}, practice.Jobs, practice.Query{}); !errors.Is(err, practice.ErrNotFound) {
		t.Errorf("unknown firm: %v", err)
	}
}

func BenchmarkListJobs50(b *testing.B) {
	r, _ := openAcme(b)
	jobs := all(b, r, acme, practice.Jobs, practice.Filter{}, 200)
	middle := idOf(b, jobs[len(jobs)/2])
	for _, bc := range []struct {
		name string
		q    practice.Query
	}{
		{"first_page", practice.Query{Limit: 50}},
		{"after_cursor", practice.Query{Limit: 50, Cursor: middle}},
		{"stage_filter", practice.Query{Limit: 50, Filter: practice.Filter{Stage: "in_progress"}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				p, err := r.List(ctx, acme, practice.Jobs, bc.q)
				if err != nil || len(p.Items) != 50 {
					b.Fatalf("%d items, %v", len(p.Items), err)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
