package xero

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters"
)

// fill sets every field to a value derived from s, so that a field added
// to the /v1 shape and missing from appendInvoice shows as a difference.
func fill(v reflect.Value, s string, t time.Time) {
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString(s + v.Type().Field(i).Name)
		case reflect.Pointer:
			if f.Type().Elem() == reflect.TypeFor[time.Time]() {
				f.Set(reflect.ValueOf(&t))
			}
		case reflect.Struct:
			if f.Type() == reflect.TypeFor[time.Time]() {
				f.Set(reflect.ValueOf(t))
			} else {
				fill(f, s, t)
			}
		}
	}
}

func TestAppendInvoice(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 30, 15, 120000000, time.UTC)
	var full adapters.Invoice
	fill(reflect.ValueOf(&full).Elem(), `Barney & "Fred" <Rubble>`+"\u2029\x00\xfe ", at)
	for _, v := range []adapters.Invoice{{}, full, {ID: "inv_1", Status: "issued", Total: adapters.Money{Amount: "1.00", Currency: "GBP"}}} {
		want, _ := json.Marshal(v)
		if got := appendInvoice(nil, &v); !bytes.Equal(got, want) {
			t.Fatalf("appendInvoice\n got %s\nwant %s", got, want)
		}
	}
}
