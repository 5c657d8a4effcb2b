package dispatcher

import (
	"bufio"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/practicegw/practicegw/practice"
)

// ExportQuery selects the deliveries an export streams.
type ExportQuery struct {
	EndpointID string
	States     []State
	// From and To bound created_at to [From, To); zero leaves a side open.
	From, To time.Time
}

// ExportNDJSON streams an endpoint's deliveries as newline-delimited JSON,
// one delivery with its attempts per line.
func (e *Engine) ExportNDJSON(ctx context.Context, t practice.Tenant, q ExportQuery, w io.Writer) error {
	bw := bufio.NewWriter(w)
	err := e.eachDelivery(ctx, t, q, func(d Delivery) error {
		line, err := practice.Marshal(d)
		if err != nil {
			return err
		}
		bw.Write(line)
		return bw.WriteByte('\n')
	}, bw.Flush)
	if err != nil {
		return fmt.Errorf("export deliveries as ndjson: %w", err)
	}
	return nil
}

// CSVHeader is the first row of a CSV export.
func CSVHeader() []string {
	return []string{"delivery_id", "event_id", "event", "endpoint_id", "state", "attempt",
		"trigger", "started_at", "duration_ms", "response_code", "error"}
}

// ExportCSV streams an endpoint's delivery log as CSV, one row per attempt.
// A delivery not attempted yet has one row with the attempt columns empty,
// so that every delivery in the range appears.
func (e *Engine) ExportCSV(ctx context.Context, t practice.Tenant, q ExportQuery, w io.Writer) error {
	cw := csv.NewWriter(w)
	flush := func() error {
		cw.Flush()
		return cw.Error()
	}
	if err := cw.Write(CSVHeader()); err != nil {
		return fmt.Errorf("export deliveries as csv: %w", err)
	}
	err := e.eachDelivery(ctx, t, q, func(d Delivery) error {
		row := []string{d.ID, d.EventID, d.Event, d.EndpointID, string(d.State)}
		if len(d.Attempts) == 0 {
			return cw.Write(append(row, "", "", "", "", "", ""))
		}
		for _, a := range d.Attempts {
			err := cw.Write(append(row[:5:5],
				strconv.Itoa(a.Number),
				string(a.Trigger),
				a.StartedAt.UTC().Format(time.RFC3339Nano),
				strconv.FormatInt(a.DurationMS, 10),
				strconv.Itoa(a.ResponseCode),
				a.Error,
			))
			if err != nil {
				return err
			}
		}
		return nil
	}, flush)
	if err != nil {
		return fmt.Errorf("export deliveries as csv: %w", err)
	}
	return flush()
}

// eachDelivery pages through the selection, calling flush after each page
// so a slow reader sees progress. Each page is its own short read: a
// client downloading slowly must not hold a store transaction open.
func (e *Engine) eachDelivery(ctx context.Context, t practice.Tenant, q ExportQuery, fn func(Delivery) error, flush func() error) error {
	dq := DeliveryQuery{EndpointID: q.EndpointID, States: q.States, From: q.From, To: q.To, Limit: MaxLimit}
	for {
		page, err := e.ListDeliveries(ctx, t, dq)
		if err != nil {
			return err
		}
		for _, d := range page.Deliveries {
			if err := fn(d); err != nil {
				return err
			}
		}
		if err := flush(); err != nil {
			return err
		}
		if !page.HasMore {
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		dq.Cursor = page.Next
	}
}
