package notifications

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Memory is an Inbox in this process, for tests and adapters given no
// store.
type Memory struct {
	mu    sync.Mutex
	now   func() time.Time
	seq   int
	seen  map[string]time.Time // scope + key -> when it is forgotten
	items map[string]map[string]*memoryItem
}

type memoryItem struct {
	body []byte
	at   time.Time
	due  time.Time
}

// NewMemory makes an empty Memory on clock now (nil: the system clock).
func NewMemory(now func() time.Time) *Memory {
	if now == nil {
		now = time.Now
	}
	return &Memory{now: now, seen: map[string]time.Time{}, items: map[string]map[string]*memoryItem{}}
}

// KeepNotification implements Inbox.
func (m *Memory) KeepNotification(_ context.Context, scope, key string, items [][]byte) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, until := range m.seen {
		if !now.Before(until) {
			delete(m.seen, k)
		}
	}
	sk := scope + "\x00" + key
	if _, ok := m.seen[sk]; ok {
		return false, nil
	}
	m.seen[sk] = now.Add(Window)
	if m.items[scope] == nil {
		m.items[scope] = map[string]*memoryItem{}
	}
	for _, it := range items {
		m.seq++
		m.items[scope][fmt.Sprintf("%016x", m.seq)] = &memoryItem{body: bytes.Clone(it), at: now, due: now}
	}
	return true, nil
}

// TakeNotifications implements Inbox.
func (m *Memory) TakeNotifications(_ context.Context, scope string, n int, lease time.Duration) ([]Kept, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var due []string
	for id, it := range m.items[scope] {
		if !now.Before(it.at.Add(Window)) {
			delete(m.items[scope], id)
			continue
		}
		if !now.Before(it.due) {
			due = append(due, id)
		}
	}
	sort.Strings(due) // ids are the keeping order
	var out []Kept
	for _, id := range due[:min(n, len(due))] {
		it := m.items[scope][id]
		it.due = now.Add(lease)
		out = append(out, Kept{ID: id, Item: bytes.Clone(it.body), At: it.at})
	}
	return out, nil
}

// SettleNotification implements Inbox.
func (m *Memory) SettleNotification(_ context.Context, scope, id string, done bool, retry time.Duration) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	it := m.items[scope][id]
	switch {
	case it == nil:
	case done:
		delete(m.items[scope], id)
	default:
		it.due = m.now().Add(retry)
	}
	return nil
}

var _ Inbox = (*Memory)(nil)
