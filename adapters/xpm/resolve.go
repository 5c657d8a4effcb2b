package xpm

import (
	"context"
	"time"

	"github.com/practicegw/practicegw/adapters/kit/linking"
	"github.com/practicegw/practicegw/practice"
)

// Other adapters name the firm's clients their own way: document stores
// by folder name, a Xero ledger by contact. LinkClient finds the XPM
// client, by linking's rule, from one read of the client list kept ten
// minutes, so a document listing of many folders costs one XPM call. XPM
// publishes no link to a Xero contact id, so a client is matched by its
// name, email or tax number alone.

// LinkClient is the client a customer or folder stands for. It
// implements linking.Linker.
func (a *Adapter) LinkClient(ctx context.Context, t practice.Tenant, c linking.Candidate) (linking.Link, error) {
	if !a.serves(t) {
		return linking.Link{}, nil
	}
	dir, err := a.names.Get(a.clock.Now(), 10*time.Minute, func() (*linking.Directory, error) {
		cs, err := a.fetchClients(ctx, time.Time{})
		if err != nil {
			return nil, err
		}
		entries := make([]linking.Entry, 0, len(cs))
		for i := range cs {
			entries = append(entries, linking.Entry{ID: "cli_" + cs[i].UUID, Name: clientName(&cs[i]),
				Email: cs[i].Email, TaxNumber: cs[i].TaxNumber})
		}
		return linking.NewDirectory(entries), nil
	})
	if err != nil {
		return linking.Link{}, err
	}
	c.External = "" // XPM holds no other system's ids
	return dir.Match(c), nil
}
