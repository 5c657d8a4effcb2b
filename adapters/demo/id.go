package demo

import (
	"crypto/rand"
	"encoding/binary"
	"sync"
	"time"
)

// An id is a kind's prefix and a ULID-style value in lowercase Crockford
// base32: 48 bits of Unix milliseconds, then 80 random bits. Ids sort by
// creation time, which is what lets the last id of a page be the cursor of
// the next and keeps pages stable while records are added.

const (
	crockford = "0123456789abcdefghjkmnpqrstvwxyz"
	ulidLen   = 26
)

// formatID encodes ms and entropy as 26 characters, most significant first.
// 128 bits fill 26 five-bit characters with two bits to spare, so the first
// character is always 0-7.
func formatID(prefix string, ms uint64, entropy [10]byte) string {
	hi := ms<<16 | uint64(entropy[0])<<8 | uint64(entropy[1])
	lo := binary.BigEndian.Uint64(entropy[2:])
	var b [ulidLen]byte
	for i := ulidLen - 1; i >= 0; i-- {
		b[i] = crockford[lo&31]
		lo = lo>>5 | hi<<59
		hi >>= 5
	}
	return prefix + string(b[:])
}

// validID reports whether s is a well-formed id with the given prefix.
func validID(prefix, s string) bool {
	if len(s) != len(prefix)+ulidLen || s[:len(prefix)] != prefix {
		return false
	}
	v := s[len(prefix):]
	if v[0] > '7' {
		return false
	}
	for i := 0; i < len(v); i++ {
		c := v[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' && c != 'i' && c != 'l' && c != 'o' && c != 'u') {
			return false
		}
	}
	return true
}

// idSource makes ids at write time. Within one millisecond, or when the
// clock steps back, it counts up from the previous id (ULID's monotonic
// mode), so ids made by one process sort in the order they were made.
type idSource struct {
	mu      sync.Mutex
	ms      uint64
	entropy [10]byte
}

func (s *idSource) next(prefix string, now time.Time) string {
	ms := uint64(now.UnixMilli())
	s.mu.Lock()
	defer s.mu.Unlock()
	if ms > s.ms {
		s.ms = ms
		rand.Read(s.entropy[:])
	} else if !increment(&s.entropy) {
		s.ms++
		rand.Read(s.entropy[:])
	}
	return formatID(prefix, s.ms, s.entropy)
}

// increment adds one to an 80-bit big-endian number and reports false when
// it wrapped around.
func increment(e *[10]byte) bool {
	for i := len(e) - 1; i >= 0; i-- {
		e[i]++
		if e[i] != 0 {
			return true
		}
	}
	return false
}
