package karbon

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/practicegw/practicegw/adapters/vendortest"
	"github.com/practicegw/practicegw/internal/practice"
)

func TestAppendJob(t *testing.T) {
	at := time.Date(2026, 3, 2, 9, 30, 15, 123456789, time.UTC)
	var full practice.Job
	vendortest.Fill(&full, `a"<&>\\`+"\u2028\t\x01\xff é ", at)
	for _, j := range []practice.Job{{}, full, {ID: "job_1", Stage: "planned", CreatedAt: at.In(time.FixedZone("x", 3600))}} {
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
		j := practice.Job{ID: "job_" + stage, Title: title, Type: title, Stage: stage, Deadline: stage, CreatedAt: at, UpdatedAt: at}
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
