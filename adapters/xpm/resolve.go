package xpm

import (
	"context"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// Other adapters name the firm's clients their own way: document stores
// by folder name, a Xero ledger by contact. These find the XPM client of
// that name, from one read of the client list kept ten minutes, so a
// document listing of many folders costs one XPM call.

// ClientForFolder returns the client named exactly as a document folder
// (case and spacing aside), else "". It implements filing.ClientResolver.
func (a *Adapter) ClientForFolder(ctx context.Context, t practice.Tenant, name string) (string, error) {
	if !a.serves(t) || name == "" {
		return "", nil
	}
	names, err := a.names.Get(a.clock.Now(), 10*time.Minute, func() (map[string]string, error) {
		cs, err := a.fetchClients(ctx, time.Time{})
		if err != nil {
			return nil, err
		}
		m := make(map[string]string, len(cs))
		for i := range cs {
			if n := norm(clientName(&cs[i])); n != "" && m[n] == "" {
				m[n] = "cli_" + cs[i].UUID
			}
		}
		return m, nil
	})
	if err != nil {
		return "", err
	}
	return names[norm(name)], nil
}

// ClientForContact returns the client named as the Xero contact; XPM
// publishes no link to Xero's contact ids. It implements
// xero.ClientResolver.
func (a *Adapter) ClientForContact(ctx context.Context, t practice.Tenant, _, name string) (string, error) {
	return a.ClientForFolder(ctx, t, name)
}
