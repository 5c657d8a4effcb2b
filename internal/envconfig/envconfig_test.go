package envconfig

import (
	"bufio"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// README.md's table of variables is this table: every variable in one is
// in the other, with the same default.
func TestTableIsREADMEs(t *testing.T) {
	readme := readmeVariables(t, "../../README.md")
	table := map[string]string{}
	for _, v := range Vars {
		if _, twice := table[v.Name]; twice {
			t.Errorf("%s is in the table twice", v.Name)
		}
		table[v.Name] = v.Default
		if v.Path == "" && v.ReadBy == "" {
			t.Errorf("%s goes nowhere: give it a Path or say who reads it", v.Name)
		}
	}
	for name, def := range table {
		got, ok := readme[name]
		switch {
		case !ok:
			t.Errorf("%s is in the table but not in README.md's", name)
		case got != def:
			t.Errorf("%s: README.md's default is %q, the table's %q", name, got, def)
		}
	}
	for name := range readme {
		if _, ok := table[name]; !ok {
			t.Errorf("%s is in README.md's table but not in internal/envconfig's", name)
		}
	}
}

// readmeVariables reads the variable table under README.md's
// Configuration heading: a row names one variable or several, and gives
// one default for all of them or one each, in backquotes; none, empty
// and off are no default.
func readmeVariables(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	quoted := regexp.MustCompile("`([^`]*)`")
	out := map[string]string{}
	inTable := false
	for sc := bufio.NewScanner(f); sc.Scan(); {
		line := sc.Text()
		if strings.HasPrefix(line, "| variable | default |") {
			inTable = true
			continue
		}
		if !inTable {
			continue
		}
		if !strings.HasPrefix(line, "|") {
			if len(out) > 0 {
				break
			}
			continue
		}
		cells := strings.Split(line, "|")
		if len(cells) < 4 || strings.HasPrefix(strings.TrimSpace(cells[1]), "---") {
			continue
		}
		var names, defaults []string
		for _, m := range quoted.FindAllStringSubmatch(cells[1], -1) {
			names = append(names, m[1])
		}
		for _, m := range quoted.FindAllStringSubmatch(cells[2], -1) {
			defaults = append(defaults, m[1])
		}
		switch {
		case len(defaults) == len(names):
		case len(defaults) == 1:
			for len(defaults) < len(names) {
				defaults = append(defaults, defaults[0])
			}
		case len(defaults) == 0 && regexp.MustCompile(`^\s*(none|empty|off)\s*$`).MatchString(cells[2]):
			defaults = make([]string, len(names))
		default:
			t.Fatalf("README.md row %q: %d variables, defaults %q", line, len(names), cells[2])
		}
		for i, name := range names {
			out[name] = defaults[i]
		}
	}
	if len(out) == 0 {
		t.Fatal("README.md has no table of variables under | variable | default |")
	}
	return out
}

func env(vars map[string]string) Lookup {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

func apply(t *testing.T, cfg string, vars map[string]string) map[string]any {
	t.Helper()
	raw, err := Apply([]byte(cfg), env(vars))
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// A field left out takes its variable, else its default; a field the
// configuration sets, placeholder or value, is kept; secrets go in as
// their placeholders, never as their values.
func TestApply(t *testing.T) {
	got := apply(t, `{"data_dir":"/srv/pgw","webhooks":{"backoff_base":"{env.MY_BASE}"},"kafka":""}`, map[string]string{
		"PRACTICEGW_DATA":                   "/ignored",
		"PRACTICEGW_REDIS":                  "redis://:hunter2@r:6379/0",
		"PRACTICEGW_KAFKA":                  "k:9092",
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE":   "1m",
		"PRACTICEGW_WEBHOOK_BACKOFF_FACTOR": " 4 ",
		"PRACTICEGW_KAFKA_SASL_PASSWORD":    "p4ss ",
		"PRACTICEGW_SECRETS_KEY":            "c2VjcmV0",
		"PRACTICEGW_KAFKA_TLS":              "true",
		"PRACTICEGW_KAFKA_PARTITIONS":       "12",
	})
	webhooks := got["webhooks"].(map[string]any)
	security := got["kafka_security"].(map[string]any)
	for what, c := range map[string]struct{ got, want any }{
		"a configured field":              {got["data_dir"], "/srv/pgw"},
		"a configured placeholder":        {webhooks["backoff_base"], "{env.MY_BASE}"},
		"a variable, trimmed":             {webhooks["backoff_factor"], "4"},
		"an empty field takes a variable": {got["kafka"], "k:9092"},
		"a default":                       {webhooks["breaker_cooldown"], "1m"},
		"a default beside set fields":     {got["dispatch"], "embedded"},
		"the Redis URL":                   {got["redis"], "{env.PRACTICEGW_REDIS}"},
		"the secrets key":                 {got["secrets_key"], "{env.PRACTICEGW_SECRETS_KEY}"},
		"the SASL password":               {security["sasl_password"], "{env.PRACTICEGW_KAFKA_SASL_PASSWORD}"},
		"a boolean":                       {security["tls"], true},
		"a number":                        {got["kafka_partitions"], float64(12)},
	} {
		if c.got != c.want {
			t.Errorf("%s: %#v, want %#v", what, c.got, c.want)
		}
	}
	raw, _ := json.Marshal(got)
	for _, secret := range []string{"hunter2", "p4ss", "c2VjcmV0"} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the configuration holds a secret's value: %s", raw)
		}
	}

	// Nothing set: defaults only, and nothing where there is none.
	empty := apply(t, "", nil)
	if empty["data_dir"] != "./data" || empty["rate_limit"] != "7200/h" {
		t.Errorf("defaults: %v", empty)
	}
	for _, none := range []string{"redis", "kafka", "secrets_key", "redis_tls", "kafka_security"} {
		if _, ok := empty[none]; ok {
			t.Errorf("%s set without its variable: %v", none, empty[none])
		}
	}
}

// A value that is not of its variable's type stops the process, naming
// the variable.
func TestApplyRefusesValuesOfTheWrongType(t *testing.T) {
	for name, bad := range map[string]string{
		"PRACTICEGW_WEBHOOK_BACKOFF_BASE":  "soon",
		"PRACTICEGW_SYNC_POLL":             "-1m",
		"PRACTICEGW_KAFKA_PARTITIONS":      "0",
		"PRACTICEGW_WEBHOOK_MAX_ENDPOINTS": "many",
		"PRACTICEGW_KAFKA_TLS":             "perhaps",
	} {
		_, err := Apply(nil, env(map[string]string{name: bad}))
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("%s=%q: %v, want an error naming it", name, bad, err)
		}
	}
}

func TestValueAndDefault(t *testing.T) {
	if got := AdminAddress(env(nil)); got != "localhost:2019" {
		t.Errorf("admin address without the variable: %q", got)
	}
	if got := AdminAddress(env(map[string]string{"PRACTICEGW_ADMIN": " localhost:2020 "})); got != "localhost:2020" {
		t.Errorf("admin address from the variable: %q", got)
	}
	if Default("PRACTICEGW_NOT_A_SETTING") != "" {
		t.Error("a variable not in the table has a default")
	}
}
