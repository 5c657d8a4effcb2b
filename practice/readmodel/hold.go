package readmodel

import (
	"context"
	"encoding/json"
	"time"
	"unsafe"

	"github.com/practicegw/practicegw/practice/recordindex"
)

// A firm's model is held in memory by a few of the instances sharing a
// store (placement.go); on the others it is unloaded. An unloaded model
// still answers everything it is asked, correctly: its next catch-up (the
// one every read, comparison and write starts with) loads the firm from
// the shared store first. The instance that placed it elsewhere unloads it
// again once it is not needed here.

// Unload drops the firm's records from memory, until the next catch-up
// loads them again. Only a model over a shared feed can be unloaded: an
// embedded store's one process always holds its firms.
func (m *Model) Unload() {
	if m.updates == nil || m.unloaded.Load() {
		return
	}
	m.write.Lock()
	defer m.write.Unlock()
	m.catchUp.Lock()
	defer m.catchUp.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, km := range m.kinds {
		km.col = recordindex.NewIndex(nil)
		km.gone = map[string]json.RawMessage{}
		km.readAt = map[string]time.Time{}
	}
	m.letters.Reset(m)
	empty := ""
	m.applied.Store(&empty)
	// Under mu, so a reader holding the read lock sees either the firm
	// whole or unloaded, never an empty copy that says it is loaded.
	m.unloaded.Store(true)
}

// Loaded reports whether the firm's records are in memory here.
func (m *Model) Loaded() bool { return !m.unloaded.Load() }

// MarkUnloaded makes a model that has not loaded yet load at its first
// catch-up rather than at Load: an instance that does not hold the firm
// never reads it whole unless asked.
func (m *Model) MarkUnloaded() {
	if m.updates != nil {
		m.unloaded.Store(true)
	}
}

// reload loads an unloaded model, once however many callers ask.
func (m *Model) reload(ctx context.Context) error {
	m.catchUp.Lock()
	defer m.catchUp.Unlock()
	if !m.unloaded.Load() {
		return nil
	}
	if err := m.load(ctx); err != nil {
		return err
	}
	m.unloaded.Store(false)
	return nil
}

// Size is what the model holds in memory: its records and tombstones, and
// the bytes they take as the bound on an instance's read models counts
// them.
type Size struct {
	Records int
	Bytes   int64
}

// What memory a record costs besides its JSON, measured against the Go
// heap (TestSizeCountsTheHeap): the entry and the strings it indexes, its
// place in the B-tree of the kind and in up to four posting lists.
var entryOverhead = int64(unsafe.Sizeof(recordindex.Entry{})) + 96

const (
	postingOverhead = 24
	// goneOverhead is a tombstone's map entry besides its JSON and id.
	goneOverhead = 64
	// readAtOverhead is a remembered read time's map entry.
	readAtOverhead = 48
)

// Size measures what the model holds now.
func (m *Model) Size() Size {
	var s Size
	m.mu.RLock()
	defer m.mu.RUnlock()
	for _, km := range m.kinds {
		km.col.Each(func(e *recordindex.Entry) {
			s.Records++
			s.Bytes += entryOverhead + int64(len(e.Raw)+len(e.ID)+len(e.Owner)+len(e.Status)+len(e.Stage)+len(e.Client)+len(e.Deadline))
			for _, v := range [...]string{e.Owner, e.Status, e.Stage, e.Client} {
				if v != "" {
					s.Bytes += postingOverhead
				}
			}
		})
		for id, raw := range km.gone {
			s.Bytes += goneOverhead + int64(len(id)+len(raw))
		}
		s.Bytes += int64(len(km.readAt)) * readAtOverhead
	}
	return s
}
