package xero

import (
	"context"
	"fmt"

	"github.com/practicegw/practicegw/adapters/kit/upstream"
)

// Connection is one organisation a Xero grant reaches, as GET
// https://api.xero.com/connections lists it: the Xero ledger's
// organisations and Xero Practice Manager's practices alike.
type Connection struct {
	ID         string `json:"id"`
	TenantID   string `json:"tenantId"`
	TenantType string `json:"tenantType"`
	TenantName string `json:"tenantName"`
}

// Connections lists the organisations the bearer token c sends reaches;
// connectionsURL is Xero's /connections on c's origin.
func Connections(ctx context.Context, c *upstream.Client, connectionsURL string) ([]Connection, error) {
	var out []Connection
	if _, err := c.JSON(ctx, upstream.Request{Path: connectionsURL}, "connections", &out); err != nil {
		return nil, fmt.Errorf("xero: the organisations a grant reaches: %w", err)
	}
	for _, con := range out {
		if con.TenantID == "" {
			return nil, upstream.Malformed(c.Label(), "connections", fmt.Errorf("a connection without tenantId"))
		}
	}
	return out, nil
}
