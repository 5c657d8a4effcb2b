package karbon

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters"
)

// fill sets every field of a struct to a value derived from s, so that a
// field added to the /v1 shape and missing from a hand-written encoder
// shows up as a difference.
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

func TestAppendJob(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 30, 15, 123456789, time.UTC)
	var full adapters.Job
	fill(reflect.ValueOf(&full).Elem(), `a"<&>\\`+"\u2028\t\x01\xff é ", at)
	for _, j := range []adapters.Job{{}, full, {ID: "job_1", Stage: "planned", CreatedAt: at.In(time.FixedZone("x", 3600))}} {
		want, _ := json.Marshal(j)
		if got := appendJob(nil, &j); !bytes.Equal(got, want) {
			t.Fatalf("appendJob\n got %s\nwant %s", got, want)
		}
	}
}

func FuzzAppendJob(f *testing.F) {
	f.Add("Year-end <accounts> & VAT", "in_review", int64(1772443815))
	f.Fuzz(func(t *testing.T, title, stage string, sec int64) {
		at := time.Unix(sec%(1<<40), 0).UTC()
		j := adapters.Job{ID: "job_" + stage, Title: title, Type: title, Stage: stage, Deadline: stage, CreatedAt: at, UpdatedAt: at}
		if len(title)%2 == 0 {
			j.ClosedAt = &at
		}
		want, err := json.Marshal(j)
		if err != nil {
			return
		}
		if got := appendJob(nil, &j); !bytes.Equal(got, want) {
			t.Fatalf("appendJob\n got %s\nwant %s", got, want)
		}
	})
}
