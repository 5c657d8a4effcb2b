package ratelimit

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/practicegw/practicegw/store/usage"
)

// MemoryUsage is a UsageStore in memory: the default without a persistent
// store, and the store tests use. It keeps retentionHours per credential
// and forgets credentials unused for that long.
type MemoryUsage struct {
	mu     sync.Mutex
	hours  map[string]map[int64]counts
	newest int64 // newest unix hour added; retention counts back from it
}

// newMemoryUsage returns an empty MemoryUsage.
func newMemoryUsage() *MemoryUsage { return &MemoryUsage{hours: map[string]map[int64]counts{}} }

// AddUsage implements UsageStore.
func (m *MemoryUsage) AddUsage(_ context.Context, id string, hour time.Time, admitted, refused int64) error {
	h := hour.Unix() / 3600
	m.mu.Lock()
	defer m.mu.Unlock()
	if h > m.newest {
		// A new hour: the moment to forget what fell out of retention.
		m.newest = h
		m.trim()
	}
	if h < m.newest-retentionHours {
		return nil
	}
	byHour := m.hours[id]
	if byHour == nil {
		byHour = map[int64]counts{}
		m.hours[id] = byHour
	}
	c := byHour[h]
	c.add(counts{admitted, refused})
	byHour[h] = c
	return nil
}

func (m *MemoryUsage) trim() {
	oldest := m.newest - retentionHours
	for id, byHour := range m.hours {
		maps.DeleteFunc(byHour, func(h int64, _ counts) bool { return h < oldest })
		if len(byHour) == 0 {
			delete(m.hours, id)
		}
	}
}

// Usage implements UsageStore.
func (m *MemoryUsage) Usage(_ context.Context, id string, since time.Time) ([]usage.Hour, error) {
	from := since.Unix() / 3600
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []usage.Hour
	for _, h := range slices.Sorted(maps.Keys(m.hours[id])) {
		if h < from {
			continue
		}
		c := m.hours[id][h]
		out = append(out, usage.Hour{Hour: time.Unix(h*3600, 0).UTC(), Admitted: c.admitted, Refused: c.refused})
	}
	return out, nil
}
