// Package envconfig is the one place practicegw reads the defaults its
// configuration takes from the environment: a table of every variable the
// processes read (practicegw run, adapt, reload and practicegw
// dispatcher), each with its default and the field of the practicegw
// app's configuration it fills.
//
// Apply fills each field the configuration leaves out, before the app is
// provisioned, so a module only ever expands the placeholders written in
// its configuration and no two of them can disagree about a variable (the
// rate limiter's Redis and the app's were once read apart). README.md's
// table of variables is held to this one by a test.
package envconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/dustin/go-humanize"
)

// Type is how a variable's value is written into the configuration.
type Type int

const (
	// Text is written as a JSON string.
	Text Type = iota
	// Duration is a string Caddy reads as a duration ("90s", "1d12h"),
	// positive.
	Duration
	// Number is a positive whole number.
	Number
	// Bool is true or false.
	Bool
	// Size is a positive amount of bytes, as "512MiB" or "2GB".
	Size
)

// Var is one environment variable.
type Var struct {
	// Name is the variable.
	Name string
	// Default applies when the variable is unset or empty and the
	// configuration leaves the field out; empty for none.
	Default string
	// Path is the field it fills: dotted JSON names under the practicegw
	// app ("webhooks.backoff_base"). Empty for the few read before there
	// is a configuration, which ReadBy names.
	Path string
	// Type is how the value is written into the configuration.
	Type Type
	// Secret variables go into the configuration as their {env.NAME}
	// placeholder, expanded when the app is provisioned, so that an
	// adapted configuration never holds their values.
	Secret bool
	// ReadBy says who reads a variable that has no Path.
	ReadBy string
}

// Vars is every variable practicegw reads, in README.md's order.
var Vars = []Var{
	{Name: "PRACTICEGW_LISTEN", Default: ":8080", ReadBy: "internal/listen, which splits it into PRACTICEGW_LISTEN_HOST and _PORT for the Caddyfiles before one is read"},
	{Name: "PRACTICEGW_ADMIN", Default: "localhost:2019", ReadBy: "the Caddyfiles' admin option and the CLI (AdminAddress)"},
	{Name: "PRACTICEGW_DATA", Default: "./data", Path: "data_dir"},
	{Name: "PRACTICEGW_REDIS", Path: "redis", Secret: true}, // its URL may carry a password
	{Name: "PRACTICEGW_REDIS_TLS_CA", Path: "redis_tls.ca"},
	{Name: "PRACTICEGW_REDIS_TLS_CERT", Path: "redis_tls.cert"},
	{Name: "PRACTICEGW_REDIS_TLS_KEY", Path: "redis_tls.key"},
	{Name: "PRACTICEGW_KAFKA", Path: "kafka"},
	{Name: "PRACTICEGW_DISPATCH", Default: "embedded", Path: "dispatch"},
	{Name: "PRACTICEGW_RATE_LIMIT", Default: "7200/h", Path: "rate_limit"},
	{Name: "PRACTICEGW_WEBHOOK_BACKOFF_BASE", Default: "30s", Path: "webhooks.backoff_base", Type: Duration},
	{Name: "PRACTICEGW_WEBHOOK_BACKOFF_FACTOR", Default: "6", Path: "webhooks.backoff_factor"},
	{Name: "PRACTICEGW_WEBHOOK_BREAKER_COOLDOWN", Default: "1m", Path: "webhooks.breaker_cooldown", Type: Duration},
	{Name: "PRACTICEGW_WEBHOOK_ALLOW_CIDRS", Path: "webhooks.allow_cidrs"},
	{Name: "PRACTICEGW_WEBHOOK_RETENTION", Default: "720h", Path: "webhooks.retention"}, // a duration or off
	{Name: "PRACTICEGW_SYNC_POLL", Default: "1m", Path: "sync.poll", Type: Duration},
	{Name: "PRACTICEGW_SYNC_RECONCILE", Default: "24h", Path: "sync.reconcile", Type: Duration},
	{Name: "PRACTICEGW_READ_MODEL_MEMORY", Path: "read_model.memory", Type: Size},
	{Name: "PRACTICEGW_READ_MODEL_REPLICAS", Path: "read_model.replicas", Type: Number},
	{Name: "PRACTICEGW_ADVERTISE", Path: "read_model.advertise"},
	{Name: "PRACTICEGW_INTERNAL_LISTEN", Path: "read_model.listen"},
	{Name: "PRACTICEGW_INTERNAL_TLS_CA", Path: "read_model.internal_tls.ca"},
	{Name: "PRACTICEGW_INTERNAL_TLS_CERT", Path: "read_model.internal_tls.cert"},
	{Name: "PRACTICEGW_INTERNAL_TLS_KEY", Path: "read_model.internal_tls.key"},
	{Name: "PRACTICEGW_INTERNAL_TLS_SERVER_NAME", Path: "read_model.internal_tls.server_name"},
	{Name: "PRACTICEGW_SIGNING_KEY", ReadBy: "signing_key, only where a configuration writes {env.PRACTICEGW_SIGNING_KEY}"},
	{Name: "PRACTICEGW_SECRETS_KEY", Path: "secrets_key", Secret: true},
	{Name: "PRACTICEGW_KAFKA_CHANGES_TOPIC", Default: "practicegw.changes", Path: "kafka_changes_topic"},
	{Name: "PRACTICEGW_KAFKA_EVENTS_TOPIC", Default: "practicegw.events", Path: "kafka_events_topic"},
	{Name: "PRACTICEGW_KAFKA_GROUP", Default: "practicegw-dispatcher", Path: "kafka_group"},
	{Name: "PRACTICEGW_KAFKA_PARTITIONS", Default: "6", Path: "kafka_partitions", Type: Number},
	{Name: "PRACTICEGW_KAFKA_TLS", Path: "kafka_security.tls", Type: Bool},
	{Name: "PRACTICEGW_KAFKA_TLS_CA", Path: "kafka_security.tls_ca"},
	{Name: "PRACTICEGW_KAFKA_TLS_CERT", Path: "kafka_security.tls_cert"},
	{Name: "PRACTICEGW_KAFKA_TLS_KEY", Path: "kafka_security.tls_key"},
	{Name: "PRACTICEGW_KAFKA_TLS_SERVER_NAME", Path: "kafka_security.tls_server_name"},
	{Name: "PRACTICEGW_KAFKA_SASL_MECHANISM", Path: "kafka_security.sasl_mechanism"},
	{Name: "PRACTICEGW_KAFKA_SASL_USERNAME", Path: "kafka_security.sasl_username"},
	{Name: "PRACTICEGW_KAFKA_SASL_PASSWORD", Path: "kafka_security.sasl_password", Secret: true},
	{Name: "PRACTICEGW_WEBHOOK_MAX_ENDPOINTS", Default: "50", Path: "webhooks.max_endpoints", Type: Number},
	{Name: "PRACTICEGW_WEBHOOK_MAX_IN_FLIGHT_PER_FIRM", Default: "64", Path: "webhooks.max_in_flight_per_firm", Type: Number},
}

// Lookup reads a variable, as os.LookupEnv does.
type Lookup func(name string) (string, bool)

// Default is the table's default of a variable, "" when it has none or is
// not in the table.
func Default(name string) string {
	for _, v := range Vars {
		if v.Name == name {
			return v.Default
		}
	}
	return ""
}

// Value is a variable read before any configuration: its value, else its
// default.
func Value(lookup Lookup, name string) string {
	if s, ok := lookup(name); ok && strings.TrimSpace(s) != "" {
		return strings.TrimSpace(s)
	}
	return Default(name)
}

// AdminAddress is where the CLI finds Caddy's admin endpoint.
func AdminAddress(lookup Lookup) string { return Value(lookup, "PRACTICEGW_ADMIN") }

// Apply fills the fields of app, the practicegw app's JSON configuration,
// that it leaves out (absent, null or "") from the table: each from its
// variable when set (a secret as its placeholder), else its default. A
// field the configuration sets, placeholder or not, is left as it is. A
// value that is not of its variable's type is an error naming the
// variable.
func Apply(app []byte, lookup Lookup) ([]byte, error) {
	cfg := map[string]any{}
	if len(bytes.TrimSpace(app)) > 0 {
		dec := json.NewDecoder(bytes.NewReader(app))
		dec.UseNumber() // numbers pass through as written
		if err := dec.Decode(&cfg); err != nil {
			return nil, fmt.Errorf("practicegw configuration: %w", err)
		}
	}
	for _, v := range Vars {
		if v.Path == "" || isSet(cfg, v.Path) {
			continue
		}
		val, ok, err := v.value(lookup)
		if err != nil {
			return nil, err
		}
		if ok {
			set(cfg, v.Path, val)
		}
	}
	return json.Marshal(cfg)
}

// value is what v puts into the configuration, and whether it puts
// anything.
func (v Var) value(lookup Lookup) (any, bool, error) {
	s, _ := lookup(v.Name)
	// A password may end in spaces; the rest is trimmed, as a shell
	// file's values often carry a stray one.
	if !v.Secret {
		s = strings.TrimSpace(s)
	}
	if s != "" && v.Secret {
		return "{env." + v.Name + "}", true, nil
	}
	if s == "" {
		s = v.Default
	}
	if s == "" {
		return nil, false, nil
	}
	switch v.Type {
	case Duration:
		if d, err := caddy.ParseDuration(s); err != nil || d <= 0 {
			return nil, false, fmt.Errorf("%s %q is not a positive duration", v.Name, s)
		}
	case Number:
		if n, err := strconv.Atoi(s); err != nil || n < 1 {
			return nil, false, fmt.Errorf("%s %q must be a positive whole number", v.Name, s)
		}
		return json.Number(s), true, nil
	case Size:
		if _, err := ParseSize(s); err != nil {
			return nil, false, fmt.Errorf("%s: %w", v.Name, err)
		}
	case Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return nil, false, fmt.Errorf("%s %q must be true or false", v.Name, s)
		}
		return b, true, nil
	}
	return s, true, nil
}

// ParseSize reads an amount of bytes: a number with a unit (B, KB, KiB,
// MB, MiB, GB, GiB, ...), positive.
func ParseSize(s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > math.MaxInt64 {
		return 0, fmt.Errorf("%q is not a positive size such as 512MiB", s)
	}
	return int64(n), nil
}

// isSet reports whether the configuration names a value at path.
func isSet(cfg map[string]any, path string) bool {
	parent, key := walk(cfg, path, false)
	if parent == nil {
		return false
	}
	switch x := parent[key].(type) {
	case nil:
		return false
	case string:
		return x != ""
	default:
		return true
	}
}

func set(cfg map[string]any, path string, val any) {
	parent, key := walk(cfg, path, true)
	parent[key] = val
}

// walk finds the object holding path's last name, making the objects on
// the way when asked to.
func walk(cfg map[string]any, path string, create bool) (map[string]any, string) {
	names := strings.Split(path, ".")
	obj := cfg
	for _, name := range names[:len(names)-1] {
		next, ok := obj[name].(map[string]any)
		if !ok {
			if !create {
				return nil, ""
			}
			next = map[string]any{}
			obj[name] = next
		}
		obj = next
	}
	return obj, names[len(names)-1]
}
