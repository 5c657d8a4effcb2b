package console

import (
	"regexp"
	"strings"
)

// reason is why a sync or a connection is not well, as the console shows
// it: a sentence in words, with the error text it came from (a chain of
// what the gateway was doing, perhaps naming the vendor's URL) a click
// away.
type reason struct {
	Summary, Detail string
}

var (
	urlInText  = regexp.MustCompile(`\b(GET|POST|PUT|PATCH|DELETE)?\s*"?https?://\S+`)
	statusCode = regexp.MustCompile(`\b(401|403|404|429|5\d\d)\b`)
)

// reasonOf turns an error's text into a reason. Texts that are already a
// sentence (a lagging copy says what it has not confirmed since when)
// keep their words; an error chain is named by what it means to the firm.
func reasonOf(text string) reason {
	text = strings.TrimSpace(text)
	if text == "" {
		return reason{}
	}
	lower := strings.ToLower(text)
	code := statusCode.FindString(lower)
	var summary string
	switch {
	case strings.Contains(lower, "invalid_grant") || strings.Contains(lower, "reconnect"):
		summary = "The vendor no longer accepts this connection's access: it needs to be reconnected."
	case code == "429" || strings.Contains(lower, "rate limit") || strings.Contains(lower, "too many requests"):
		summary = "The vendor is limiting the gateway's requests: the sync waits, then goes on."
	case strings.Contains(lower, "circuit breaker") || strings.Contains(lower, "breaker is open"):
		summary = "The vendor failed several times in a row: the gateway pauses its calls, then tries again."
	case strings.Contains(lower, "deadline exceeded") || strings.Contains(lower, "timeout") || strings.Contains(lower, "timed out"):
		summary = "The vendor did not answer in time: the sync tries again."
	case code == "401" || code == "403" || strings.Contains(lower, "unauthorized") || strings.Contains(lower, "forbidden"):
		summary = "The vendor refused the gateway's access."
	case strings.HasPrefix(code, "5") || strings.Contains(lower, "unavailable") || strings.Contains(lower, "connection refused") || strings.Contains(lower, "no such host"):
		summary = "The vendor is unavailable: the sync tries again."
	case strings.Contains(lower, "unreadable") || strings.Contains(lower, "decoding") || strings.Contains(lower, "unexpected"):
		summary = "The vendor answered with something the gateway cannot read: the sync tries again."
	case !strings.Contains(text, ": ") && !urlInText.MatchString(text):
		// Already one statement.
		return reason{Summary: sentence(text)}
	default:
		summary = "The gateway's last call to the vendor failed: it tries again."
	}
	return reason{Summary: summary, Detail: text}
}

// sentence starts s with a capital and ends it with a full stop.
func sentence(s string) string {
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
