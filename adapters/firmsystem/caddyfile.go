package firmsystem

import (
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/practicegw/practicegw/adapters/kit/filing"
)

// UnmarshalCaddyfile reads a system's Caddyfile block into cfg, its
// configuration struct:
//
//	records|ledger|documents <system> {
//	    <option> <value...>          a field, by its JSON name
//	    <block> { <option> ... }     a nested struct (upstream, oauth2, ...)
//	    stage_map <theirs> <ours>    one entry of a map
//	    kind "<phrase>"... <kind>    a document kind rule
//	    rate_limit <n>/<s|m|h>       inside upstream { }
//	}
//
// Every system reads its block the same way, so that a newcomer to one has
// learnt them all (see config/README.md). An option whose {$VAR} expanded
// to nothing leaves its field unset.
func UnmarshalCaddyfile(d *caddyfile.Dispenser, cfg any) error {
	d.Next() // the system's name
	if d.NextArg() {
		return d.ArgErr()
	}
	v := reflect.ValueOf(cfg).Elem()
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := setOption(d, v); err != nil {
			return err
		}
	}
	return nil
}

// repeatable maps Caddyfile lines that add one entry to a map field to
// that field's JSON name.
var repeatable = map[string]string{
	"stage_map":       "stage_map",
	"client_status":   "client_statuses",
	"settlement_rail": "settlement_rails",
}

// setOption sets the field the current line names, looking into nested
// structs (oauth2, filing) for names the outer struct lacks.
func setOption(d *caddyfile.Dispenser, v reflect.Value) error {
	name := d.Val()
	if name == "kind" {
		rule, err := kindRule(d)
		if err != nil {
			return err
		}
		fv, ok := findField(v, "kind_rules")
		if !ok {
			return d.Errf("%s has no document kinds", v.Type())
		}
		fv.Set(reflect.Append(fv, reflect.ValueOf(rule)))
		return nil
	}
	if json, ok := repeatable[name]; ok {
		fv, found := findField(v, json)
		var key, val string
		if !found || !d.Args(&key, &val) || d.NextArg() {
			return d.Errf("%s takes two arguments: a name and a value", name)
		}
		if fv.IsNil() {
			fv.Set(reflect.MakeMap(fv.Type()))
		}
		fv.SetMapIndex(reflect.ValueOf(key), reflect.ValueOf(val))
		return nil
	}
	fv, ok := findField(v, name)
	if !ok {
		return d.Errf("unknown option %q", name)
	}
	if fv.Kind() == reflect.Struct {
		// A block, such as upstream { ... }.
		if d.NextArg() {
			return d.ArgErr()
		}
		for nesting := d.Nesting(); d.NextBlock(nesting); {
			if d.Val() == "rate_limit" {
				if err := rateOption(d, fv); err != nil {
					return err
				}
				continue
			}
			if err := setOption(d, fv); err != nil {
				return err
			}
		}
		return nil
	}
	args := d.RemainingArgs()
	if len(args) == 0 {
		// An unset {$VAR} expands to nothing: leave the field unset.
		return nil
	}
	if fv.Kind() == reflect.Slice && fv.Type().Elem().Kind() == reflect.String {
		fv.Set(reflect.ValueOf(args).Convert(fv.Type()))
		return nil
	}
	if len(args) != 1 {
		return d.ArgErr()
	}
	return setScalar(d, fv, args[0])
}

func setScalar(d *caddyfile.Dispenser, fv reflect.Value, val string) error {
	switch fv.Kind() {
	case reflect.String:
		fv.SetString(val)
	case reflect.Int, reflect.Int64:
		if fv.Type().Name() == "Duration" {
			dur, err := caddy.ParseDuration(val)
			if err != nil {
				return d.Errf("%s: %v", d.Val(), err)
			}
			fv.SetInt(int64(dur))
			return nil
		}
		n, err := strconv.ParseInt(val, 10, 64)
		if err != nil {
			return d.Errf("%q is not a whole number", val)
		}
		fv.SetInt(n)
	case reflect.Bool:
		b, err := strconv.ParseBool(val)
		if err != nil {
			return d.Errf("%q is not true or false", val)
		}
		fv.SetBool(b)
	default:
		return d.Errf("cannot set %s from the Caddyfile", fv.Type())
	}
	return nil
}

// rateOption reads `rate_limit <n>/<s|m|h>` into a policy's rate_limit and
// rate_period.
func rateOption(d *caddyfile.Dispenser, policy reflect.Value) error {
	var val string
	if !d.Args(&val) || d.NextArg() {
		return d.ArgErr()
	}
	n, unit, ok := strings.Cut(val, "/")
	limit, err := strconv.Atoi(n)
	period := map[string]time.Duration{"s": time.Second, "m": time.Minute, "h": time.Hour}[unit]
	if !ok || err != nil || period == 0 {
		return d.Errf("rate_limit %q must look like 120/m", val)
	}
	lf, _ := findField(policy, "rate_limit")
	pf, _ := findField(policy, "rate_period")
	lf.SetInt(int64(limit))
	pf.SetInt(int64(period))
	return nil
}

// kindRule reads `kind "<phrase>" ["<phrase>"...] <kind>`.
func kindRule(d *caddyfile.Dispenser) (filing.Rule, error) {
	args := d.RemainingArgs()
	if len(args) < 2 {
		return filing.Rule{}, d.Err(`kind takes one or more phrases and a document kind: kind "Tax return" tax_return`)
	}
	return filing.Rule{Match: args[:len(args)-1], Kind: args[len(args)-1]}, nil
}

// findField finds a settable field by JSON name in v or in v's struct
// fields (one level down).
func findField(v reflect.Value, name string) (reflect.Value, bool) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		if jsonName(t.Field(i)) == name {
			return v.Field(i), true
		}
	}
	for i := 0; i < t.NumField(); i++ {
		if f := v.Field(i); f.Kind() == reflect.Struct && jsonName(t.Field(i)) != "upstream" {
			if fv, ok := findField(f, name); ok {
				return fv, true
			}
		}
	}
	return reflect.Value{}, false
}

func jsonName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name
}
