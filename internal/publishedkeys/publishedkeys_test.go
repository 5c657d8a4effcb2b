package publishedkeys

import (
	"crypto/rand"
	"encoding/base64"
	"io/fs"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"testing/fstest"
)

// exampleFiles are where the repository shows configuration: a key that
// appears there is copied by someone.
func exampleFile(p string) bool {
	switch {
	case strings.HasSuffix(p, ".go"):
		return false
	case p == "Caddyfile", strings.HasSuffix(p, ".md"):
		return true
	}
	for _, dir := range []string{"deploy/", "config/", "docs/", "e2e/testdata/"} {
		if strings.HasPrefix(p, dir) {
			return true
		}
	}
	return false
}

var base64Run = regexp.MustCompile(`[A-Za-z0-9+/]{40,}={0,2}`)
var hexOnly = regexp.MustCompile(`^[0-9a-fA-F]+$`)

// keyLike are the values in text that the gateway would take as a key:
// standard base64 of at least 32 bytes (a digest in hex aside), and, for
// base64 of base64 as Kubernetes Secrets hold it, the inner value too.
func keyLike(text string) [][]byte {
	var out [][]byte
	for _, m := range base64Run.FindAllString(text, -1) {
		if hexOnly.MatchString(m) {
			continue
		}
		raw, err := base64.StdEncoding.Strict().DecodeString(m)
		if err != nil || len(raw) < 32 {
			continue
		}
		out = append(out, raw)
		out = append(out, keyLike(string(raw))...)
	}
	return out
}

// unlisted lists the files of fsys holding a key-looking value that Check
// does not refuse.
func unlisted(t *testing.T, fsys fs.FS) []string {
	var found []string
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			// Installed npm packages are not the repository's examples.
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return fs.SkipDir
			}
			return nil
		}
		if !exampleFile(p) {
			return nil
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		for _, k := range keyLike(string(b)) {
			if Check(k) == nil {
				found = append(found, p+": "+base64.StdEncoding.EncodeToString(k))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// Every key-looking value in the repository's examples is refused: adding
// an example key without listing it here fails this test.
func TestRepositoryExamplesAreRefused(t *testing.T) {
	root := os.DirFS("../..")
	if _, err := fs.Stat(root, "deploy/secrets.env.example"); err != nil {
		t.Fatalf("not at the repository root: %v", err)
	}
	for _, f := range unlisted(t, root) {
		t.Errorf("%s is key-looking and not refused: add its SHA-256 to published", f)
	}
}

// The scan finds keys where examples live, base64 inside base64 included,
// and leaves Go code and hex digests alone.
func TestScanFindsUnlistedKeys(t *testing.T) {
	fresh := func() string {
		b := make([]byte, 32)
		rand.Read(b)
		return base64.StdEncoding.EncodeToString(b)
	}
	inner := fresh()
	fsys := fstest.MapFS{
		"deploy/new.env":               {Data: []byte("PRACTICEGW_SIGNING_KEY=" + fresh() + "\n")},
		"config/README.md":             {Data: []byte("signing_key k1 " + fresh() + "\n")},
		"deploy/k8s.yaml":              {Data: []byte("KEY: " + base64.StdEncoding.EncodeToString([]byte(inner)) + "\n")},
		"internal/x/x.go":              {Data: []byte(`var k = "` + fresh() + `"`)},
		"adapters/demo/testdata/d.txt": {Data: []byte(fresh())},
		"docs/digests.md":              {Data: []byte(strings.Repeat("ab12", 16))},
		"deploy/secrets.env.example":   {Data: []byte("PRACTICEGW_SIGNING_KEY=Y29tcG9zZS1kZW1vLXNpZ25pbmcta2V5Om5vdC1zZWNyZXQ6bmV2ZXItdXNlLWluLXByb2R1Y3Rpb24=\n")},
	}
	got := unlisted(t, fsys)
	files := map[string]int{}
	for _, f := range got {
		files[path.Clean(strings.SplitN(f, ":", 2)[0])]++
	}
	if files["deploy/new.env"] != 1 || files["config/README.md"] != 1 || files["deploy/k8s.yaml"] != 2 || len(files) != 3 {
		t.Errorf("unlisted = %q", got)
	}
}

func TestCheck(t *testing.T) {
	compose, _ := base64.StdEncoding.DecodeString("Y29tcG9zZS1kZW1vLXNpZ25pbmcta2V5Om5vdC1zZWNyZXQ6bmV2ZXItdXNlLWluLXByb2R1Y3Rpb24=")
	if err := Check(compose); err == nil || !strings.Contains(err.Error(), "deploy/secrets.env.example") {
		t.Errorf("the compose placeholder: %v", err)
	}
	if err := Check([]byte("an unpublished key of thirty-two bytes")); err != nil {
		t.Errorf("an unpublished key: %v", err)
	}
}
