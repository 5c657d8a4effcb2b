package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/spf13/cobra"

	"github.com/practicegw/practicegw/internal/envconfig"
)

// practicegw validate (and adapt --validate) checks a configuration as it
// is written and says each problem in one line, without opening the
// stores: Caddy's validate provisions every module as a start would, and
// the practicegw app would open the embedded file (waiting on the lock
// of the gateway that runs on it) and Redis. The configuration checked is
// marked check_only, on which the app provisions over a throwaway store
// and refuses to start.

// checked replaces Caddy's validate with practicegw's, and makes adapt's
// --validate the same check; the commands keep their flags.
func checked(root *cobra.Command) {
	for _, c := range root.Commands() {
		switch c.Name() {
		case "validate":
			c.RunE = func(cmd *cobra.Command, _ []string) error {
				if err := loadEnvFiles(cmd); err != nil {
					return err
				}
				return check(cmd)
			}
		case "adapt":
			adapt := c.RunE
			c.RunE = func(cmd *cobra.Command, args []string) error {
				if v, _ := cmd.Flags().GetBool("validate"); !v {
					return adapt(cmd, args)
				}
				if err := cmd.Flags().Set("validate", "false"); err != nil {
					return err
				}
				if err := adapt(cmd, args); err != nil {
					return err
				}
				return check(cmd)
			}
		}
	}
}

// loadEnvFiles sets the variables of the command's --envfile files.
func loadEnvFiles(cmd *cobra.Command) error {
	files, err := cmd.Flags().GetStringSlice("envfile")
	if err != nil {
		return nil // a command without the flag
	}
	return envconfig.LoadFiles(files)
}

// check adapts the command's --config (the Caddyfile here when none is
// named) and validates it marked check_only, printing each problem on a
// line of its own, the file's name first, and "Valid configuration" when
// there is none.
func check(cmd *cobra.Command) error {
	path, _ := cmd.Flags().GetString("config")
	adapter, _ := cmd.Flags().GetString("adapter")
	cfg, err := loadChecked(path, adapter)
	if err == nil {
		err = caddy.Validate(cfg)
	}
	if err == nil {
		fmt.Fprintln(cmd.OutOrStdout(), "Valid configuration")
		return nil
	}
	name := path
	if name == "" {
		name = "Caddyfile"
	}
	for _, p := range problems(err) {
		fmt.Fprintf(cmd.ErrOrStderr(), "%s: %s\n", name, p)
	}
	cmd.SilenceErrors = true
	return err
}

// loadChecked reads and adapts a configuration, as Caddy's commands do,
// and marks its practicegw app check_only.
func loadChecked(path, adapter string) (*caddy.Config, error) {
	if path == "" {
		if _, err := os.Stat("Caddyfile"); err != nil {
			return nil, errors.New("no configuration to check: give --config, or run where a Caddyfile is")
		}
		path = "Caddyfile"
	}
	var input []byte
	var err error
	if path == "-" {
		input, err = io.ReadAll(os.Stdin)
	} else {
		input, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the configuration: %w", err)
	}
	if adapter == "" && !strings.HasSuffix(path, ".json") {
		adapter = "caddyfile"
	}
	if adapter != "" && adapter != "json" {
		a := caddyconfig.GetAdapter(adapter)
		if a == nil {
			return nil, fmt.Errorf("no configuration adapter %q", adapter)
		}
		if input, _, err = a.Adapt(input, map[string]any{"filename": path}); err != nil {
			return nil, err
		}
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(input, &raw); err != nil {
		return nil, fmt.Errorf("the configuration is not a JSON object: %w", err)
	}
	var apps map[string]json.RawMessage
	if len(raw["apps"]) > 0 {
		if err := json.Unmarshal(raw["apps"], &apps); err != nil {
			return nil, fmt.Errorf("apps: %w", err)
		}
	}
	if app := apps["practicegw"]; len(app) > 0 {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(app, &fields); err != nil {
			return nil, fmt.Errorf("apps.practicegw: %w", err)
		}
		fields["check_only"] = json.RawMessage("true")
		apps["practicegw"], _ = json.Marshal(fields)
		raw["apps"], _ = json.Marshal(apps)
	}
	// What the modules log while they are provisioned is no answer of
	// the check: its problems are.
	raw["logging"] = json.RawMessage(`{"logs":{"default":{"level":"ERROR"}}}`)
	input, _ = json.Marshal(raw)
	var cfg *caddy.Config
	if err := caddy.StrictUnmarshalJSON(caddy.RemoveMetaFields(input), &cfg); err != nil {
		return nil, fmt.Errorf("decoding the configuration: %w", err)
	}
	return cfg, nil
}

// provisioning finds the last module Caddy was provisioning when it
// failed: what the problem is of.
var provisioning = regexp.MustCompile(`provision ([a-z0-9_.]+): `)

// problems are the lines an error of validation says: each of the
// problems it joins, else the one, each without the chain of the modules
// Caddy was provisioning, bar the last.
func problems(err error) []string {
	var joined interface{ Unwrap() []error }
	var out []string
	if errors.As(err, &joined) {
		for _, e := range joined.Unwrap() {
			out = append(out, problems(e)...)
		}
		return out
	}
	msg := err.Error()
	if m := provisioning.FindAllStringSubmatchIndex(msg, -1); len(m) > 0 {
		last := m[len(m)-1]
		msg = msg[last[2]:last[3]] + ": " + msg[last[1]:]
		// practicegw's own problems name the app already.
		msg = strings.Replace(msg, "practicegw: practicegw: ", "practicegw: ", 1)
	}
	for _, line := range strings.Split(msg, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}
