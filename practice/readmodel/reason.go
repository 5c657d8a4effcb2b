package readmodel

import (
	"cmp"
	"regexp"
	"strings"
	"time"
)

// What an administrator reads of a sync that is not live, and of a
// connection that needs reconnecting: one sentence naming the vendor by
// its name and saying what happens next. The error chain it comes from
// (what the gateway was doing, perhaps the vendor's URL) is the log's:
// the sync logs each failure as it happens.

var (
	urlInText  = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE)?\s*"?https?://\S+`)
	statusCode = regexp.MustCompile(`\b(401|403|404|429|5\d\d)\b`)
)

// Plainly says text, a sync's or a connection's reason, as one sentence
// for an administrator about label's system ("Karbon"). A text that is
// already a statement keeps its words; an error chain is said by what it
// means to the firm.
func Plainly(label, text string) string {
	text = strings.TrimSpace(text)
	if text == "" {
		return ""
	}
	label = cmp.Or(label, "The vendor")
	lower := strings.ToLower(text)
	code := statusCode.FindString(lower)
	switch {
	case strings.Contains(lower, "access key"):
		return label + " no longer accepts this connection's access key; reconnect it with a new one."
	case strings.Contains(lower, "invalid_grant") || strings.Contains(lower, "refresh token") ||
		strings.Contains(lower, "authenticationfault") || strings.Contains(lower, "must be reconnected") ||
		strings.Contains(lower, "waits to be reconnected"):
		return label + " no longer accepts this connection's grant; reconnect it."
	case code == "429" || strings.Contains(lower, "rate limit") || strings.Contains(lower, "too many requests"):
		return label + " is limiting the gateway's requests; the sync waits its turn, then goes on."
	case strings.Contains(lower, "circuit breaker") || strings.Contains(lower, "breaker is open"):
		return label + " failed several times in a row; the gateway pauses its calls, then tries again."
	case strings.Contains(lower, "deadline exceeded") || strings.Contains(lower, "timeout") || strings.Contains(lower, "timed out"):
		return label + " did not answer in time; the sync tries again."
	case code == "401" || code == "403" || strings.Contains(lower, "unauthorized") || strings.Contains(lower, "forbidden"):
		return label + " refused the gateway's access; the sync tries again, and the connection may need reconnecting."
	case strings.HasPrefix(code, "5") || strings.Contains(lower, "unavailable") || strings.Contains(lower, "connection refused") ||
		strings.Contains(lower, "no such host") || strings.Contains(lower, "eof"):
		return label + " is unavailable; the sync tries again."
	case strings.Contains(lower, "paging repeats") || strings.Contains(lower, "next link repeats"):
		// A vendor list that sends a page again would be read for ever.
		return label + "'s paging repeats a page the gateway already read, so the list cannot be read to its end; the sync tries again."
	case strings.Contains(lower, "unreadable") || strings.Contains(lower, "decoding") || strings.Contains(lower, "unexpected"):
		return label + " answered with something the gateway cannot read; the sync tries again."
	case !strings.Contains(text, ": ") && !urlInText.MatchString(text):
		// Already one statement, in the gateway's words.
		return Sentence(text)
	}
	return "The gateway's last call to " + label + " failed; the sync tries again."
}

// Sentence starts s with a capital and ends it with a full stop.
func Sentence(s string) string {
	s = strings.TrimSpace(s)
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// Reason is why the sync is not live, as an administrator reads it: one
// sentence, never the error chain; "" when it is live or backfilling.
func (s Status) Reason() string {
	label := cmp.Or(s.Label, s.System)
	switch s.State {
	case StateFailing:
		said := Plainly(label, s.Why)
		var kinds []string
		for _, k := range s.Kinds {
			if k.State == StateFailing {
				kinds = append(kinds, string(k.Kind))
			}
		}
		if len(kinds) > 0 && len(kinds) < len(s.Kinds) {
			said += " It affects the " + andList(kinds) + "; the rest is up to date."
		}
		return said
	case StateLagging:
		var kinds []string
		var since time.Time
		for _, k := range s.Kinds {
			if k.State == StateLagging {
				kinds = append(kinds, string(k.Kind))
				if since.IsZero() || k.ConfirmedAt.Before(since) {
					since = k.ConfirmedAt
				}
			}
		}
		if len(kinds) == 0 {
			return Plainly(label, s.Why)
		}
		return label + " has not confirmed the " + andList(kinds) + " since " + since.UTC().Format("15:04 UTC on 2 January 2006") +
			"; the sync is behind and catches up on its next pass."
	}
	return ""
}

// andList joins words as people list them: "a", "a and b", "a, b and c".
func andList(words []string) string {
	switch len(words) {
	case 0:
		return ""
	case 1:
		return words[0]
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
