package practice

import (
	"encoding/json"
	"sync"
	"time"
)

// The two document kinds that evidence an engagement: the letter the firm
// sends with its proposal and the copy the client signed.
const (
	LetterKind       = "engagement_letter"
	SignedLetterKind = "signed_engagement_letter"
)

// LetterWindow is how far from an engagement's date (its created_at) a
// client's letter may be filed and still be taken for that engagement's.
const LetterWindow = 30 * 24 * time.Hour

// Letter is what linking needs of a document of one of the letter kinds.
type Letter struct {
	ID     string
	Client string
	Kind   string
	// Engagement is the engagement the document names, when its store
	// says (no real store does; filing conventions name a client only).
	Engagement string
	// At is when the document was filed (its created_at).
	At time.Time
}

// LetterOf reads a document's letter; ok is false for a document of any
// other kind or of no client.
func LetterOf(d Document) (l Letter, ok bool) {
	if d.Kind != LetterKind && d.Kind != SignedLetterKind || IDOf(d.Client) == "" {
		return Letter{}, false
	}
	return Letter{ID: d.ID, Client: IDOf(d.Client), Kind: d.Kind, Engagement: d.Engagement, At: d.CreatedAt}, true
}

// Dated is an engagement of a client as linking needs it: its id and its
// date (created_at).
type Dated struct {
	ID string
	At time.Time
}

// LinkLetters fills e's letter_document and signed_document from letters,
// the documents of e's client of the letter kinds, where the link is
// unambiguous, and reports whether it filled either. others are the
// client's other engagements. A wrong letter is worse than none, so a
// field is linked only to:
//   - the one letter of its kind that names e, or else
//   - the client's one letter of its kind that names no engagement and
//     was filed within LetterWindow of e's created_at, either side, when
//     no other engagement of the client is within LetterWindow of it (a
//     letter between two proposals is either's).
//
// Two candidates (a second letter, a letter naming e twice over) leave the
// field empty. A field the engagement's own system filled is kept: the
// vendor naming the letter is the surest link.
func LinkLetters(e *Engagement, letters []Letter, others []Dated) bool {
	filled := false
	for _, f := range []struct {
		field *string
		kind  string
	}{{&e.LetterDocument, LetterKind}, {&e.SignedDocument, SignedLetterKind}} {
		if *f.field != "" {
			continue
		}
		if id := letterFor(e, f.kind, letters, others); id != "" {
			*f.field, filled = id, true
		}
	}
	return filled
}

func letterFor(e *Engagement, kind string, letters []Letter, others []Dated) string {
	var named, near []string
	for _, l := range letters {
		if l.Kind != kind || l.Client != IDOf(e.Client) {
			continue
		}
		switch {
		case l.Engagement == e.ID:
			named = append(named, l.ID)
		case l.Engagement == "" && within(l.At, e.CreatedAt, LetterWindow):
			near = append(near, l.ID)
		}
	}
	if len(named) > 0 {
		return only(named)
	}
	id := only(near)
	for _, l := range letters {
		if l.ID != id {
			continue
		}
		for _, o := range others {
			if o.ID != e.ID && within(l.At, o.At, LetterWindow) {
				return ""
			}
		}
	}
	return id
}

func only(ids []string) string {
	if len(ids) == 1 {
		return ids[0]
	}
	return ""
}

func within(a, b time.Time, d time.Duration) bool {
	gap := a.Sub(b)
	return gap <= d && gap >= -d
}

// Letters are a firm's letters, and its engagements' dates, by client, so
// that its engagements are linked to them as they are read (LinkLetters).
// A firm's systems may keep their records in copies of their own (a
// system connected beside one the Caddyfile names), so one Letters may be
// shared by them: each copy puts and drops what it holds as its owner,
// and Reset forgets one owner's alone. It guards itself; a copy calls it
// under its own lock, and Letters calls nothing back.
type Letters struct {
	mu sync.RWMutex
	// byClient holds each client's letters by document id.
	byClient map[string]map[string]Letter
	// dates holds each client's engagements' dates by engagement id.
	dates map[string]map[string]time.Time
	// held is the client and owner of each letter and each engagement
	// held, to drop them again.
	held map[heldKey]heldBy
}

type heldKey struct {
	engagement bool
	id         string
}

type heldBy struct {
	client string
	owner  any
}

// NewLetters makes an empty Letters.
func NewLetters() *Letters {
	return &Letters{byClient: map[string]map[string]Letter{}, dates: map[string]map[string]time.Time{},
		held: map[heldKey]heldBy{}}
}

// Put holds document id's letter for owner, given the document's JSON,
// or drops the letter it no longer is (moved to another kind or client).
func (l *Letters) Put(owner any, id string, raw json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(heldKey{id: id})
	var d Document
	if json.Unmarshal(raw, &d) != nil {
		return
	}
	d.ID = id
	lt, ok := LetterOf(d)
	if !ok {
		return
	}
	if l.byClient[lt.Client] == nil {
		l.byClient[lt.Client] = map[string]Letter{}
	}
	l.byClient[lt.Client][id] = lt
	l.held[heldKey{id: id}] = heldBy{client: lt.Client, owner: owner}
}

// PutEngagement holds engagement id's client and date for owner, given
// its JSON.
func (l *Letters) PutEngagement(owner any, id string, raw json.RawMessage) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(heldKey{engagement: true, id: id})
	var e Engagement
	if json.Unmarshal(raw, &e) != nil || IDOf(e.Client) == "" {
		return
	}
	if l.dates[IDOf(e.Client)] == nil {
		l.dates[IDOf(e.Client)] = map[string]time.Time{}
	}
	l.dates[IDOf(e.Client)][id] = e.CreatedAt
	l.held[heldKey{engagement: true, id: id}] = heldBy{client: IDOf(e.Client), owner: owner}
}

// Drop forgets document id's letter, if it was one.
func (l *Letters) Drop(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(heldKey{id: id})
}

// DropEngagement forgets engagement id.
func (l *Letters) DropEngagement(id string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dropLocked(heldKey{engagement: true, id: id})
}

// Reset forgets every letter and engagement owner holds, as its copy is
// loaded again or let go.
func (l *Letters) Reset(owner any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, h := range l.held {
		if h.owner == owner {
			l.dropLocked(k)
		}
	}
}

func (l *Letters) dropLocked(k heldKey) {
	h, ok := l.held[k]
	if !ok {
		return
	}
	delete(l.held, k)
	if k.engagement {
		delete(l.dates[h.client], k.id)
		if len(l.dates[h.client]) == 0 {
			delete(l.dates, h.client)
		}
		return
	}
	delete(l.byClient[h.client], k.id)
	if len(l.byClient[h.client]) == 0 {
		delete(l.byClient, h.client)
	}
}

// Link answers an engagement's JSON with its letters linked; raw itself
// when none links (or it cannot be read: it is answered as it is).
func (l *Letters) Link(raw json.RawMessage) json.RawMessage {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.byClient) == 0 {
		return raw
	}
	var e Engagement
	if json.Unmarshal(raw, &e) != nil || len(l.byClient[IDOf(e.Client)]) == 0 {
		return raw
	}
	held := make([]Letter, 0, len(l.byClient[IDOf(e.Client)]))
	for _, lt := range l.byClient[IDOf(e.Client)] {
		held = append(held, lt)
	}
	others := make([]Dated, 0, len(l.dates[IDOf(e.Client)]))
	for id, at := range l.dates[IDOf(e.Client)] {
		others = append(others, Dated{ID: id, At: at})
	}
	if !LinkLetters(&e, held, others) {
		return raw
	}
	linked, err := Marshal(&e)
	if err != nil {
		return raw
	}
	return linked
}
