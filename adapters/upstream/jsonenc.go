package upstream

import (
	"time"
	"unicode/utf8"
)

// Adapters translate whole vendor pages on the request path, and
// encoding/json's reflection costs more than the rest of a job's
// translation. These append JSON exactly as encoding/json writes it
// (HTML-safe escaping, RFC 3339 times), so that an adapter's hand-written
// encoder for a /v1 shape is byte for byte what json.Marshal gives; each
// such encoder has a test holding it to that.

const hexDigits = "0123456789abcdef"

// AppendJSONString appends s as encoding/json writes a string.
func AppendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// AppendJSONTime appends t as time.Time's MarshalJSON writes it.
func AppendJSONTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"')
}

// AppendJSONField appends ,"name":"value" (or the first field, without the
// comma, when b ends in '{').
func AppendJSONField(b []byte, name, value string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return AppendJSONString(b, value)
}

// AppendJSONTimeField appends ,"name":"<time>".
func AppendJSONTimeField(b []byte, name string, t time.Time) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return AppendJSONTime(b, t)
}
