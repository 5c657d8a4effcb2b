package dispatcher

import (
	"slices"
	"strings"

	"github.com/practicegw/practicegw/practice"
)

// KindFilter is the event kinds a subscriber asked for, by name: "*" for
// all, a kind, the engagement_letter.signed alias, or "<resource>.*" for
// every kind of a resource ("job.*"). An endpoint's events are one (of
// names only); a stream's events= parameter is another.
type KindFilter []string

// ParseKindFilter checks names and patterns and returns them without
// duplicates, in the order given. Errors are *practice.InvalidError for
// the events parameter.
func ParseKindFilter(names []string) (KindFilter, error) {
	if len(names) == 0 {
		return nil, practice.Missing("events")
	}
	var out KindFilter
	for _, n := range names {
		if !validName(n) && !validPattern(n) {
			return nil, practice.Invalid("events", "%q is not an event kind or pattern; use \"*\", any of %v, %q, or a resource's kinds such as \"job.*\".",
				n, Kinds(), EngagementLetterSign)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

func validName(n string) bool { return n == AllEvents || n == EngagementLetterSign || isKind(n) }

// validPattern reports whether n is "<resource>.*" for a resource that
// has events a pattern matches (removals are named, never matched).
func validPattern(n string) bool {
	resource, ok := strings.CutSuffix(n, ".*")
	if !ok {
		return false
	}
	return slices.ContainsFunc(Kinds(), func(k string) bool { return !isRemoval(k) && strings.HasPrefix(k, resource+".") })
}

// DeliveryName is the name under which the subscriber receives an event of
// kind, or false if it asked for none of it.
//
// A removal kind (client.deleted, ...) is received only by a subscriber
// that names it: "*" and "<resource>.*" mean the kinds that announce
// records as they are, which is all they meant before removals had
// events, so an endpoint subscribed to "*" long ago is not sent a payload
// with no record in it. Every subscriber is treated alike, whenever it
// subscribed, so that "*" means one thing in the API.
//
// A subscriber receives each event at most once: asking for both
// engagement.signed (by name, "*" or "engagement.*") and its alias
// engagement_letter.signed, it gets the canonical name. Receivers
// de-duplicate on the event id anyway, so a second copy under the other
// name could only ever be discarded.
func (f KindFilter) DeliveryName(kind string) (string, bool) {
	wildcards := !isRemoval(kind)
	for _, n := range f {
		if n == kind || n == AllEvents && wildcards {
			return kind, true
		}
		if !wildcards {
			continue
		}
		if resource, ok := strings.CutSuffix(n, ".*"); ok && strings.HasPrefix(kind, resource+".") {
			return kind, true
		}
	}
	if kind == EngagementSigned && slices.Contains(f, EngagementLetterSign) {
		return EngagementLetterSign, true
	}
	return "", false
}
