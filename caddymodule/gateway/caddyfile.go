package gateway

import (
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"

	"github.com/practicegw/practicegw/adapters/firmsystem"
	"github.com/practicegw/practicegw/caddymodule/api"
	"github.com/practicegw/practicegw/caddymodule/connect"
	"github.com/practicegw/practicegw/cluster"
	"github.com/practicegw/practicegw/internal/envconfig"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

func init() {
	httpcaddyfile.RegisterGlobalOption("practicegw", parseGlobalOption)
}

// parseGlobalOption sets up the practicegw app from the global options
// block. Syntax:
//
//	practicegw {
//	    data_dir    <path>
//	    redis       [<redis://host:port/db>]
//	    redis_tls {
//	        ca   <pem file>
//	        cert <pem file>
//	        key  <pem file>
//	    }
//	    rate_limit  <N/s|N/m|N/h>
//	    kafka       [<broker>[,<broker>...]]
//	    dispatch    embedded|off
//	    webhooks {
//	        backoff_base   <duration>
//	        backoff_factor <number>
//	        allow_cidrs    <cidr>[,<cidr>...]
//	        timeout        <duration>
//	        breaker_cooldown <duration>
//	        retention      <duration>|off
//	        max_endpoints  <n>
//	        max_in_flight_per_firm <n>
//	    }
//	    sync {
//	        poll      <duration>
//	        reconcile <duration>
//	    }
//	    signing_key <id> <base64-secret>
//	    secrets_key [<base64-key>]
//	    deprecated <METHOD> <path> <since YYYY-MM-DD> <sunset YYYY-MM-DD> [<link>]
//	    connect {
//	        public_url <https://gw.example.com>
//	        xero|sharepoint|google_drive|dropbox { client_id ... client_secret ... }
//	        karbon { bearer ... }
//	    }
//	    firm <frm_id> {
//	        name      <display name>
//	        records   demo|karbon [{ ... }]
//	        documents demo|sharepoint|onedrive|google_drive|dropbox [{ ... }]
//	        ledger    demo|xero [{ ... }]
//	        engagements records|ledger|none
//	    }
//	}
//
// redis may be left without a value (as {$PRACTICEGW_REDIS} expands to
// nothing when unset), which keeps everything in the embedded store.
// secrets_key is usually a placeholder, {env.X} or {file.X}, read at
// start; without a value it is PRACTICEGW_SECRETS_KEY.
//
// The adapted app is the effective configuration: every option left out
// takes its environment variable's value, else its default, from the one
// table of them (internal/envconfig), secrets as their {env.X}
// placeholders, so that `practicegw adapt` shows what a gateway runs with
// and never a secret.
func parseGlobalOption(d *caddyfile.Dispenser, _ any) (any, error) {
	app := new(App)
	if err := app.UnmarshalCaddyfile(d); err != nil {
		return nil, err
	}
	if err := applyEnvironment(app, os.LookupEnv); err != nil {
		return nil, d.Errf("practicegw: %v", err)
	}
	return httpcaddyfile.App{Name: "practicegw", Value: caddyconfig.JSON(app, nil)}, nil
}

// UnmarshalCaddyfile implements caddyfile.Unmarshaler.
func (a *App) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // option name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		if err := unmarshalOption(d, a); err != nil {
			return err
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// unmarshalOption reads one line of the practicegw block: a setting of
// one value here, a block or a repeated line in unmarshalBlock.
func unmarshalOption(d *caddyfile.Dispenser, a *App) error {
	// An option that may be left without a value, as {$VAR} expands to
	// nothing when unset: it then takes its default.
	optional := map[string]*string{"redis": &a.Redis, "rate_limit": &a.RateLimit, "dispatch": &a.Dispatch, "secrets_key": &a.SecretsKey}
	switch opt := d.Val(); opt {
	case "data_dir":
		if !d.NextArg() {
			return d.ArgErr()
		}
		a.DataDir = d.Val()
	case "redis", "rate_limit", "dispatch", "secrets_key":
		if d.NextArg() {
			*optional[opt] = d.Val()
		}
	case "sandbox_triggers_per_minute":
		if !d.NextArg() {
			return d.ArgErr()
		}
		n, err := strconv.Atoi(d.Val())
		if err != nil || n < 1 {
			return d.Errf("sandbox_triggers_per_minute %q must be a positive whole number", d.Val())
		}
		a.SandboxTriggersPerMinute = n
	case "signing_key":
		var k SigningKeyConfig
		if !d.Args(&k.ID, &k.Secret) {
			return d.ArgErr()
		}
		a.SigningKeys = append(a.SigningKeys, k)
	default:
		return unmarshalBlock(d, a)
	}
	return nil
}

// unmarshalBlock reads an option of the practicegw block with a block of
// its own (kafka, webhooks, sync, read_model, redis_tls, connect, firm) or
// that may be given more than once (deprecated).
func unmarshalBlock(d *caddyfile.Dispenser, a *App) error {
	switch d.Val() {
	case "redis_tls":
		return unmarshalRedisTLS(d, &a.RedisTLS)
	case "kafka":
		if d.NextArg() {
			a.Kafka = d.Val()
		}
		return unmarshalKafka(d, a)
	case "webhooks":
		return unmarshalWebhooks(d, &a.Webhooks)
	case "sync":
		return unmarshalSync(d, &a.Sync)
	case "read_model":
		return unmarshalReadModel(d, &a.ReadModel)
	case "deprecated":
		dep, err := unmarshalDeprecation(d)
		if err != nil {
			return err
		}
		a.Deprecated = append(a.Deprecated, dep)
	case "connect":
		a.Connect = new(connect.Config)
		return a.Connect.UnmarshalCaddyfile(d)
	case "firm":
		f, err := unmarshalFirm(d)
		if err != nil {
			return err
		}
		a.Firms = append(a.Firms, f)
	default:
		return d.Errf("unknown practicegw option %q", d.Val())
	}
	return nil
}

func unmarshalFirm(d *caddyfile.Dispenser) (Firm, error) {
	var f Firm
	if !d.NextArg() {
		return f, d.ArgErr()
	}
	f.ID = d.Val()
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch opt := d.Val(); opt {
		case "name":
			if !d.NextArg() {
				return f, d.ArgErr()
			}
			f.Name = d.Val()
			if d.NextArg() {
				return f, d.ArgErr()
			}
		case "records", "documents", "ledger":
			if err := unmarshalSystem(d, &f, opt); err != nil {
				return f, err
			}
		case "engagements":
			if !d.NextArg() {
				return f, d.ArgErr()
			}
			f.Engagements = d.Val()
			if d.NextArg() {
				return f, d.ArgErr()
			}
			switch f.Engagements {
			case firmsystem.EngagementsRecords, firmsystem.EngagementsLedger, firmsystem.EngagementsNone:
			default:
				return f, d.Errf("engagements %q: the source is records, ledger or none", f.Engagements)
			}
		case "link_clients":
			if !d.NextArg() {
				return f, d.ArgErr()
			}
			f.LinkClients = d.Val()
			if d.NextArg() {
				return f, d.ArgErr()
			}
			if _, err := firmsystem.Linked(f.LinkClients); err != nil {
				return f, d.Err(err.Error())
			}
		default:
			return f, d.Errf("unknown firm option %q", opt)
		}
	}
	return f, nil
}

// unmarshalDeprecation reads `deprecated METHOD /v1/path since sunset [link]`.
func unmarshalDeprecation(d *caddyfile.Dispenser) (api.Deprecation, error) {
	args := d.RemainingArgs()
	if len(args) != 4 && len(args) != 5 {
		return api.Deprecation{}, d.ArgErr()
	}
	dep := api.Deprecation{Method: strings.ToUpper(args[0]), Path: args[1]}
	var err error
	if dep.Since, err = time.Parse(time.DateOnly, args[2]); err != nil {
		return dep, d.Errf("deprecated: since date: %v", err)
	}
	if dep.Sunset, err = time.Parse(time.DateOnly, args[3]); err != nil {
		return dep, d.Errf("deprecated: sunset date: %v", err)
	}
	if len(args) == 5 {
		dep.Link = args[4]
	}
	return dep, nil
}

func unmarshalWebhooks(d *caddyfile.Dispenser, w *WebhookConfig) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		// Values may be empty where an unset {$VAR} expanded to nothing:
		// the option is then left out, and takes its default.
		val := ""
		if d.NextArg() {
			val = d.Val()
		}
		var err error
		switch opt {
		case "backoff_base":
			err = durationOption(d, val, &w.BackoffBase)
		case "backoff_factor":
			w.BackoffFactor = val
		case "allow_cidrs":
			w.AllowCIDRs = val
		case "breaker_cooldown":
			err = durationOption(d, val, &w.BreakerCooldown)
		case "retention":
			w.Retention = val
		case "max_endpoints":
			err = countOption(d, val, &w.MaxEndpoints)
		case "max_in_flight_per_firm":
			err = countOption(d, val, &w.MaxInFlightPerFirm)
		case "timeout":
			if val == "" {
				return d.ArgErr()
			}
			err = durationOption(d, val, &w.Timeout)
		default:
			return d.Errf("unknown webhooks option %q", opt)
		}
		if err != nil {
			return err
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// durationOption reads a positive duration ("90s", "1d12h"); empty
// leaves the option out.
func durationOption(d *caddyfile.Dispenser, val string, dst *caddy.Duration) error {
	if val == "" {
		return nil
	}
	t, err := caddy.ParseDuration(val)
	if err != nil || t <= 0 {
		return d.Errf("%s %q is not a positive duration", d.Val(), val)
	}
	*dst = caddy.Duration(t)
	return nil
}

// countOption reads a positive whole number; empty leaves the option out.
func countOption(d *caddyfile.Dispenser, val string, dst *int) error {
	if val == "" {
		return nil
	}
	n, err := strconv.Atoi(val)
	if err != nil || n < 1 {
		return d.Errf("%s %q must be a positive whole number", d.Val(), val)
	}
	*dst = n
	return nil
}

// unmarshalSync reads the read model's sync intervals; a value left empty
// (an unset {$VAR}) keeps the default.
func unmarshalSync(d *caddyfile.Dispenser, s *SyncConfig) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		val := ""
		if d.NextArg() {
			val = d.Val()
		}
		var err error
		switch opt {
		case "poll":
			err = durationOption(d, val, &s.Poll)
		case "reconcile":
			err = durationOption(d, val, &s.Reconcile)
		default:
			return d.Errf("unknown sync option %q", opt)
		}
		if err != nil {
			return err
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// unmarshalReadModel reads the read_model block; a value left empty (an
// unset {$VAR}) keeps the default:
//
//	read_model {
//		memory    512MiB
//		replicas  2
//		listen    10.1.2.3:8090
//		advertise https://10.1.2.3:8090
//		internal_tls {
//			ca          /etc/practicegw/cluster-ca.pem
//			cert        /etc/practicegw/instance.pem
//			key         /etc/practicegw/instance-key.pem
//			server_name practicegw-internal
//		}
//	}
func unmarshalReadModel(d *caddyfile.Dispenser, c *ReadModelConfig) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		val := ""
		if d.NextArg() {
			val = d.Val()
		}
		var err error
		switch opt {
		case "memory":
			if val != "" && !strings.Contains(val, "{") {
				if _, perr := envconfig.ParseSize(val); perr != nil {
					return d.Errf("read_model memory: %v", perr)
				}
			}
			c.Memory = val
		case "replicas":
			err = countOption(d, val, &c.Replicas)
		case "advertise":
			c.Advertise = val
		case "listen":
			c.Listen = val
		case "internal_tls":
			if val != "" {
				return d.ArgErr()
			}
			err = unmarshalInternalTLS(d, &c.InternalTLS)
		default:
			return d.Errf("unknown read_model option %q", opt)
		}
		if err != nil {
			return err
		}
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// unmarshalInternalTLS reads the internal listener's TLS; a value left
// empty (an unset {$VAR}) leaves it out.
func unmarshalInternalTLS(d *caddyfile.Dispenser, t *cluster.InternalTLS) error {
	return unmarshalOptions(d, "internal_tls", map[string]*string{"ca": &t.CA, "cert": &t.Cert, "key": &t.Key, "server_name": &t.ServerName})
}

// unmarshalRedisTLS reads the files a rediss:// connection is made with;
// a value left empty (an unset {$VAR}) leaves its file out.
func unmarshalRedisTLS(d *caddyfile.Dispenser, files *redisstore.TLSFiles) error {
	return unmarshalOptions(d, "redis_tls", map[string]*string{"ca": &files.CA, "cert": &files.Cert, "key": &files.Key})
}

// unmarshalOptions reads block's one-value options into the fields they
// name.
func unmarshalOptions(d *caddyfile.Dispenser, block string, fields map[string]*string) error {
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		val := ""
		if d.NextArg() {
			val = d.Val()
		}
		field, ok := fields[opt]
		if !ok {
			return d.Errf("unknown %s option %q", block, opt)
		}
		*field = val
		if d.NextArg() {
			return d.ArgErr()
		}
	}
	return nil
}

// unmarshalSystem reads a firm's `records|ledger|documents <system> {...}`
// line: demo (no block) leaves the role to the demo records (Firm.Demo); any other
// system is the guest module of that name in the role's namespace, which
// reads its own block.
func unmarshalSystem(d *caddyfile.Dispenser, f *Firm, role string) error {
	if !d.NextArg() {
		return d.ArgErr()
	}
	name := d.Val()
	if name == "demo" {
		if d.NextArg() {
			return d.ArgErr()
		}
		if d.NextBlock(d.Nesting()) {
			return d.Errf("%s demo takes no options", role)
		}
		if !slices.Contains(f.Demo, role) {
			f.Demo = append(f.Demo, role)
		}
		return nil
	}
	id := firmsystem.Namespace(role) + "." + name
	if _, err := caddy.GetModule(id); err != nil {
		return d.Errf("%s %q is not a system practicegw has an adapter for", role, name)
	}
	mod, err := caddyfile.UnmarshalModule(d, id)
	if err != nil {
		return err
	}
	raw := caddyconfig.JSONModuleObject(mod, "system", name, nil)
	switch role {
	case "records":
		f.RecordsRaw = raw
	case "ledger":
		f.LedgerRaw = raw
	case "documents":
		f.DocumentsRaw = raw
	}
	return nil
}

// unmarshalKafka reads the optional block after `kafka [<brokers>]`:
//
//	kafka <brokers> {
//	    changes_topic   <name>
//	    events_topic    <name>
//	    group           <name>
//	    partitions      <n>
//	    tls             [true|false]
//	    tls_ca          <pem file>
//	    tls_cert        <pem file>
//	    tls_key         <pem file>
//	    tls_server_name <name>
//	    sasl            PLAIN|SCRAM-SHA-256|SCRAM-SHA-512 <username> <password>
//	}
//
// Values may be placeholders ({env.X}, {file.X}), read when the app
// starts; a setting left out falls back to its PRACTICEGW_KAFKA_*
// variable.
func unmarshalKafka(d *caddyfile.Dispenser, a *App) error {
	if d.NextArg() {
		return d.ArgErr()
	}
	sec := &a.KafkaSecurity
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		opt := d.Val()
		args := d.RemainingArgs()
		one := func(dst *string) error {
			if len(args) != 1 {
				return d.Errf("kafka %s takes one value", opt)
			}
			*dst = args[0]
			return nil
		}
		var err error
		switch opt {
		case "changes_topic":
			err = one(&a.KafkaChangesTopic)
		case "events_topic":
			err = one(&a.KafkaEventsTopic)
		case "group":
			err = one(&a.KafkaGroup)
		case "partitions":
			if len(args) != 1 {
				return d.Errf("kafka partitions takes one value")
			}
			err = countOption(d, args[0], &a.KafkaPartitions)
		case "tls":
			sec.TLS = true
			if len(args) == 1 {
				if sec.TLS, err = strconv.ParseBool(args[0]); err != nil {
					return d.Errf("kafka tls %q: want true or false", args[0])
				}
			} else if len(args) > 1 {
				return d.ArgErr()
			}
		case "tls_ca":
			err = one(&sec.CAFile)
		case "tls_cert":
			err = one(&sec.CertFile)
		case "tls_key":
			err = one(&sec.KeyFile)
		case "tls_server_name":
			err = one(&sec.ServerName)
		case "sasl":
			if len(args) != 3 {
				return d.Err("kafka sasl takes a mechanism, a username and a password")
			}
			sec.SASLMechanism, sec.Username, sec.Password = args[0], args[1], args[2]
		default:
			return d.Errf("unknown kafka option %q", opt)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
