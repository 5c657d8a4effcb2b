package readmodel

import (
	"encoding/json"

	"github.com/practicegw/practicegw/practice"
)

// An engagement's letter_document and signed_document are the client's
// engagement letters in the firm's document store, linked where the link
// is unambiguous (practice.LinkLetters). No proposal system names its
// letter, so the link joins two systems' records: the proposal's, kept by
// the records or ledger sync, and the documents', kept by the document
// store's. It is computed when an engagement is read, from the documents
// this copy holds at that moment, and never stored:
//
//   - Correct in any order. A letter filed late, removed, or joined by a
//     second one changes the next read's answer at once, whichever sync
//     brought it and whichever instance answers (every instance applies
//     the same feed); nothing has to be recomputed, and no stored link can
//     go stale or be left behind by a missed update.
//   - Not a new version of the engagement. Version and updated_at are what
//     the engagement's own system published, and they order its states
//     (changes.Older, here and in the Recorder): a version the gateway
//     made for a link would rank above states the vendor made earlier but
//     the sync read later, and those edits, a signing among them, would
//     be dropped as old. The contract has no engagement.updated event
//     either, so a new version would tell a receiver nothing it can
//     follow; document.filed and document.deleted are what announce a
//     letter coming and going. Events carry the engagement as its system
//     gave it, without the link, and so does the state change records
//     are compared with (Model.Last).
type letters struct {
	// byClient holds each client's letters by document id.
	byClient map[string]map[string]practice.Letter
	// client is the client of each letter held, to drop it again.
	client map[string]string
}

func newLetters() letters {
	return letters{byClient: map[string]map[string]practice.Letter{}, client: map[string]string{}}
}

// put holds document raw's letter, or drops a letter it no longer is.
func (l *letters) put(id string, raw json.RawMessage) {
	l.drop(id)
	var d practice.Document
	if json.Unmarshal(raw, &d) != nil {
		return
	}
	d.ID = id
	lt, ok := practice.LetterOf(d)
	if !ok {
		return
	}
	if l.byClient[lt.Client] == nil {
		l.byClient[lt.Client] = map[string]practice.Letter{}
	}
	l.byClient[lt.Client][id] = lt
	l.client[id] = lt.Client
}

// drop forgets document id's letter, if it was one.
func (l *letters) drop(id string) {
	c, ok := l.client[id]
	if !ok {
		return
	}
	delete(l.client, id)
	delete(l.byClient[c], id)
	if len(l.byClient[c]) == 0 {
		delete(l.byClient, c)
	}
}

// link answers engagement raw with its letters linked; raw itself when
// none links (or it cannot be read: it is answered as stored).
func (l *letters) link(raw json.RawMessage) json.RawMessage {
	if len(l.client) == 0 {
		return raw
	}
	var e practice.Engagement
	if json.Unmarshal(raw, &e) != nil || len(l.byClient[e.Client]) == 0 {
		return raw
	}
	held := make([]practice.Letter, 0, len(l.byClient[e.Client]))
	for _, lt := range l.byClient[e.Client] {
		held = append(held, lt)
	}
	if !practice.LinkLetters(&e, held) {
		return raw
	}
	linked, err := json.Marshal(&e)
	if err != nil {
		return raw
	}
	return linked
}

// linkedLocked answers a record of k as it is read: an engagement with its
// letters; the caller holds mu.
func (m *Model) linkedLocked(k practice.Kind, raw json.RawMessage) json.RawMessage {
	if k != practice.Engagements || raw == nil {
		return raw
	}
	return m.letters.link(raw)
}
