package xero

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/practice"
)

func TestAppendInvoice(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 30, 15, 120000000, time.UTC)
	var full practice.Invoice
	vendortest.Fill(&full, `Barney & "Fred" <Rubble>`+"\u2029\x00\xfe ", at)
	for _, v := range []practice.Invoice{{}, full, {ID: "inv_1", Status: "issued", Total: practice.Money{Amount: "1.00", Currency: "GBP"}}} {
		want, _ := json.Marshal(v)
		if got := appendInvoice(nil, &v); !bytes.Equal(got, want) {
			t.Fatalf("appendInvoice\n got %s\nwant %s", got, want)
		}
	}
}
