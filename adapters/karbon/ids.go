package karbon

import "strings"

// Karbon keys are short alphanumeric strings ("2LPSrkzbYrn4"). Our ids keep
// the type prefix and, for clients, a marker for which Karbon collection
// the key lives in: cli_c- contacts, cli_o- organizations, cli_g- client
// groups.

// clientRef names a client in Karbon.
type clientRef struct {
	kind byte // 'c', 'o' or 'g'
	key  string
}

func (r clientRef) id() string { return "cli_" + string(r.kind) + "-" + r.key }

// collection is the Karbon path segment of the client's collection.
func (r clientRef) collection() string {
	switch r.kind {
	case 'c':
		return "Contacts"
	case 'o':
		return "Organizations"
	}
	return "ClientGroups"
}

// clientType is Karbon's ClientType of work items for the client.
func (r clientRef) clientType() string {
	switch r.kind {
	case 'c':
		return "Contact"
	case 'o':
		return "Organization"
	}
	return "ClientGroup"
}

func refFromClientType(clientType, key string) (clientRef, bool) {
	switch clientType {
	case "Contact":
		return clientRef{'c', key}, validKey(key)
	case "Organization":
		return clientRef{'o', key}, validKey(key)
	case "ClientGroup":
		return clientRef{'g', key}, validKey(key)
	}
	return clientRef{}, false
}

func parseClientID(id string) (clientRef, bool) {
	rest, ok := strings.CutPrefix(id, "cli_")
	if !ok || len(rest) < 3 || rest[1] != '-' {
		return clientRef{}, false
	}
	switch rest[0] {
	case 'c', 'o', 'g':
	default:
		return clientRef{}, false
	}
	return clientRef{rest[0], rest[2:]}, validKey(rest[2:])
}

// parseKey takes the Karbon key out of an id with prefix.
func parseKey(id, prefix string) (string, bool) {
	key, ok := strings.CutPrefix(id, prefix)
	return key, ok && validKey(key)
}

// validKey keeps ids that are not Karbon keys out of request paths.
func validKey(key string) bool {
	if key == "" || len(key) > 64 {
		return false
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}

func userID(key string) string {
	if key == "" {
		return ""
	}
	return "usr_" + key
}
