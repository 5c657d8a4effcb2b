package readmodel

import (
	"encoding/json"

	"github.com/practicegw/practicegw/practice"
)

// Engagement letters. An engagement's letter_document and signed_document are the client's
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
//
// The letters held are a practice.Letters (the firm's, shared by the copies
// of its systems when Config.Letters is set), kept beside the documents'
// index by applyLocked, rebuilt by load and emptied by Unload.

// linkedLocked answers a record of k as it is read: an engagement with its
// letters; the caller holds mu.
func (m *Model) linkedLocked(k practice.Kind, raw json.RawMessage) json.RawMessage {
	if k != practice.Engagements || raw == nil {
		return raw
	}
	return m.letters.Link(raw)
}
