package karbon

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/paging"
	"github.com/practicegw/practicegw/adapters/kit/upstream"
	"github.com/practicegw/practicegw/practice"
	"github.com/practicegw/practicegw/practice/stamps"
)

func (a *Adapter) listPeople(ctx context.Context, f practice.Filter, cur paging.Cursor, limit int) (practice.Page, error) {
	hour := a.clock.Now().Truncate(time.Hour).Format(time.RFC3339)
	w := paging.Walk[userSummary]{
		Fetch: a.fetchUsers,
		ID:    func(u userSummary) string { return u.Id },
		Convert: func(ctx context.Context, us []paging.Found[userSummary]) ([]json.RawMessage, error) {
			return paging.Each(ctx, a.cfg.DetailConcurrency, len(us), func(ctx context.Context, i int) (json.RawMessage, error) {
				u := us[i].Item
				// Roles are only on the user's own record; a user's
				// entry is read again at most hourly or when the list
				// shows a new name or email.
				version := u.Name + "\x00" + u.EmailAddress + "\x00" + hour
				raw, ok := json.RawMessage(nil), false
				if c, hit := a.details.get(userID(u.Id), version); hit {
					raw, ok = c.raw, true
				}
				if !ok {
					var err error
					if raw, err = a.getPerson(ctx, u.Id); err != nil {
						// Listed, but its own record cannot be read:
						// the user's alone.
						return nil, practice.Unusable(practice.People, userID(u.Id), "the user's record", err)
					}
					a.details.put(userID(u.Id), cached{version: version, raw: raw})
				}
				if !f.UpdatedSince.IsZero() && !updatedSince(raw, f.UpdatedSince) {
					return nil, nil
				}
				return raw, nil
			})
		},
		MaxPages: a.cfg.MaxScanPages,
	}
	return w.Collect(ctx, paging.Frame{}, cur, limit)
}

// fetchUsers reads one page of users: the first or the one at Karbon's
// next link.
func (a *Adapter) fetchUsers(ctx context.Context, _, token string) (paging.VendorPage[userSummary], error) {
	var page paging.VendorPage[userSummary]
	items, next, err := odataPage[userSummary](ctx, a, "/v3/Users", "users", nil, token, a.cfg.PageSize)
	if err != nil {
		return page, err
	}
	for _, u := range items {
		if !validKey(u.Id) {
			return page, upstream.Malformed(a.c.Label(), "users", fmt.Errorf("user key %q", u.Id))
		}
	}
	page.Items, page.Next = items, next
	return page, nil
}

func (a *Adapter) getPerson(ctx context.Context, key string) (json.RawMessage, error) {
	u := userDetail{}
	began := a.clock.Now()
	if err := a.getJSON(ctx, "/v3/Users/"+url.PathEscape(key), "user", &u); err != nil {
		return nil, fmt.Errorf("karbon: read user %s: %w", key, err)
	}
	if u.Id == "" {
		u.Id = key
	}
	role := "staff"
	if len(u.Roles) > 0 && strings.TrimSpace(u.Roles[0].Name) != "" {
		role = strings.ReplaceAll(norm(u.Roles[0].Name), " ", "_")
	}
	p := practice.Person{ID: userID(u.Id), Object: "person", Name: u.Name, Email: practice.Known(u.EmailAddress), Role: role, Active: true}
	// Karbon publishes no time for a user: its updated_at and version
	// are the gateway's stamp (practice/stamps). The version a user
	// carried before was 1, which every stamp is after.
	st, err := a.stamps.Of(ctx, stamps.Read{Kind: practice.People, ID: p.ID, Content: &p, Began: began})
	if err != nil {
		return nil, err
	}
	p.UpdatedAt, p.Version = st.At, st.Version()
	raw, err := practice.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("karbon: encode person: %w", err)
	}
	return raw, nil
}

// directory is the firm's Karbon users by key and email: Karbon names
// owners and assignees by email in some places and by key in others.
type directory struct {
	emails map[string]string // key -> email
	keys   map[string]string // lower-case email -> key
}

// key returns the user key of an email or key, "" when unknown.
func (d *directory) key(v string) string {
	if _, ok := d.emails[v]; ok {
		return v
	}
	return d.keys[strings.ToLower(v)]
}

func (d *directory) email(key string) string { return d.emails[key] }

// directory reads every user, at most every ten minutes.
func (a *Adapter) directory(ctx context.Context) (*directory, error) {
	return a.users.Get(a.clock.Now(), 10*time.Minute, func() (*directory, error) {
		d := &directory{emails: map[string]string{}, keys: map[string]string{}}
		err := paging.All(ctx, func(ctx context.Context, token string) (paging.VendorPage[userSummary], error) {
			return a.fetchUsers(ctx, "", token)
		}, func(_ context.Context, u userSummary) error {
			d.emails[u.Id] = u.EmailAddress
			d.keys[strings.ToLower(u.EmailAddress)] = u.Id
			return nil
		})
		if err != nil {
			return nil, err
		}
		return d, nil
	})
}
