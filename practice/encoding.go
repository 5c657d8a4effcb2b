package practice

import (
	"bytes"
	"encoding/json"

	"github.com/go-json-experiment/json/jsontext"
)

// Records, change records and events have one encoding on every path (an
// adapter's list and read, a write's answer, the read model's stores, the
// change records and the signed events built from them): encoding/json
// without HTML escaping. A receiver compares names and paths byte for
// byte, and "Birch & Co <Holdings>" must reach it as written, never as
// "Birch \u0026 Co \u003cHoldings\u003e"; an answer is JSON, never HTML,
// and is served as application/json.

// Marshal encodes v as every record is encoded: encoding/json's encoding
// without HTML escaping, and without the newline its Encoder ends with.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	return b[:len(b):len(b)], nil
}

// htmlEscapes are the escapes encoding/json writes for '<', '>' and '&'
// (and '\u2028' and '\u2029', which it always writes so).
var htmlEscapes = [][]byte{[]byte(`\u003c`), []byte(`\u003e`), []byte(`\u0026`)}

// Canonical is raw in the records' encoding: a record encoded with HTML
// escaping (an earlier version's state kept in a store, a record an
// adapter encoded with json.Marshal) has its '<', '>' and '&' written as
// they are. Everything else is left byte for byte, keys in their order;
// raw that holds no such escape is returned as it is, and so is raw that
// is not valid JSON.
func Canonical(raw []byte) []byte {
	escaped := false
	for _, e := range htmlEscapes {
		escaped = escaped || bytes.Contains(raw, e)
	}
	if !escaped {
		return raw
	}
	// jsontext writes every string with the fewest escapes it needs, as
	// encoding/json does without HTML escaping: the same bytes as Marshal
	// of the same values, U+2028 and U+2029 escaped as Marshal escapes
	// them.
	out, err := jsontext.AppendFormat(nil, raw, jsontext.EscapeForJS(true))
	if err != nil {
		return raw
	}
	return out
}
