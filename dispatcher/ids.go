package dispatcher

import (
	"crypto/rand"
	"crypto/sha256"
	"strings"
	"time"
)

// Identifiers use Crockford's base32 alphabet in lower case. Its symbols are
// in ascending byte order, so an id that starts with an encoded time sorts by
// that time as a plain string: stores can page on ids alone.
const alphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// maxMillis is the largest millisecond count ten base32 characters hold.
const maxMillis = 1<<50 - 1

// timePrefix encodes t's Unix milliseconds as ten sortable characters.
func timePrefix(t time.Time) string {
	ms := t.UnixMilli()
	switch {
	case ms < 0:
		ms = 0
	case ms > maxMillis:
		ms = maxMillis
	}
	var b [10]byte
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = alphabet[ms&31]
		ms >>= 5
	}
	return string(b[:])
}

// encodeBits encodes the first 5n bits of src; src must hold at least that.
func encodeBits(src []byte, n int) string {
	out := make([]byte, n)
	var acc uint64
	var bits uint
	j := 0
	for i := range out {
		for bits < 5 {
			acc = acc<<8 | uint64(src[j])
			j++
			bits += 8
		}
		bits -= 5
		out[i] = alphabet[(acc>>bits)&31]
		acc &= 1<<bits - 1
	}
	return string(out)
}

// EventID is the id Derive gives the event of kind raised by a change: ten
// characters of the occurrence time in milliseconds, so that ids sort by
// occurred_at, then sixteen of SHA-256(changeID|kind), so that deriving the
// same change again yields the same id and the receiver's de-duplication
// holds across re-ingestion.
func EventID(changeID, kind string, occurredAt time.Time) string {
	sum := sha256.Sum256([]byte(changeID + "|" + kind))
	return "evt_" + timePrefix(occurredAt) + encodeBits(sum[:], 16)
}

// EventIDFloor is the smallest event id that can have occurred at or after
// t. Stores use it to turn an occurred_at range into a key range.
func EventIDFloor(t time.Time) string { return "evt_" + timePrefix(t) }

// deliveryID is deterministic so that fanning the same event out twice
// creates nothing twice. It starts with the event's time, as the event id
// does, so that the deliveries of one moment sit together in a store's
// index: a bbolt commit of a batch of new deliveries then rewrites a few
// adjacent pages rather than one page per delivery.
func deliveryID(eventID, endpointID, name string) string {
	sum := sha256.Sum256([]byte(eventID + "|" + endpointID + "|" + name))
	prefix := strings.Repeat("0", 10)
	if strings.HasPrefix(eventID, "evt_") && len(eventID) >= 14 {
		prefix = eventID[4:14]
	}
	return "dlv_" + prefix + encodeBits(sum[:], 16)
}

// newEndpointID is time-ordered so that a firm's endpoints list in the
// order they were created.
func newEndpointID(now time.Time) string {
	var b [10]byte
	rand.Read(b[:])
	return "we_" + timePrefix(now) + encodeBits(b[:], 16)
}
