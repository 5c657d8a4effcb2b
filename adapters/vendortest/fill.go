package vendortest

import (
	"reflect"
	"time"
)

// Fill sets every string, time and nested struct field of the struct v
// points to: strings to s followed by the field's name, times to t. A test
// comparing a hand-written encoder with encoding/json on a filled value
// sees any field added to the /v1 shape and missing from the encoder.
func Fill(v any, s string, t time.Time) {
	fill(reflect.ValueOf(v).Elem(), s, t)
}

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
