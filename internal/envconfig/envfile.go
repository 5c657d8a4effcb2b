package envconfig

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// ReadFile reads an environment file as Caddy's --envfile reads one:
// KEY=VALUE lines, an optional "export " before the key, # comments,
// single or double quotes around the value.
func ReadFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("reading environment file: %w", err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, val, ok := strings.Cut(line, "=")
		key = strings.TrimPrefix(key, "export ")
		if !ok || key == "" || strings.ContainsAny(key, " \t") {
			return nil, fmt.Errorf("%s:%d: want KEY=VALUE", path, n)
		}
		if before, _, found := strings.Cut(val, "#"); found {
			val = strings.TrimRight(before, " \t")
		}
		if len(val) >= 2 && (val[0] == '"' || val[0] == '\'') && val[len(val)-1] == val[0] {
			val = val[1 : len(val)-1]
		}
		out[key] = val
	}
	return out, sc.Err()
}

// LoadFiles sets the variables of the environment files that the
// environment does not set already, as Caddy's --envfile does.
func LoadFiles(paths []string) error {
	for _, p := range paths {
		vars, err := ReadFile(p)
		if err != nil {
			return err
		}
		for k, v := range vars {
			if _, set := os.LookupEnv(k); !set {
				if err := os.Setenv(k, v); err != nil {
					return err
				}
			}
		}
	}
	return nil
}
