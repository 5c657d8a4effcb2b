package sealed

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	k, _ := Random()
	secret := []byte("whsec_c2VjcmV0LWJ5dGVzLW9mLWFuLWVuZHBvaW50")
	v := k.Seal(secret, "endpoint-secrets:we_1")
	if bytes.Contains(v, secret) || !IsSealed(v) || !bytes.HasPrefix(v, []byte("pgws1:"+k.ID()+":")) {
		t.Fatalf("sealed value %q", v)
	}
	got, err := k.Open(v, "endpoint-secrets:we_1")
	if err != nil || !bytes.Equal(got, secret) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if again := k.Seal(secret, "endpoint-secrets:we_1"); bytes.Equal(again, v) {
		t.Error("sealing twice gave the same value: the nonce is not fresh")
	}
	if _, err := k.Open(v, "endpoint-secrets:we_2"); !errors.Is(err, ErrDamaged) {
		t.Errorf("opened as another endpoint's: %v", err)
	}
	for i := range v {
		bad := bytes.Clone(v)
		bad[i] ^= 0x01
		if pt, err := k.Open(bad, "endpoint-secrets:we_1"); err == nil {
			t.Fatalf("byte %d changed and it still opened: %q", i, pt)
		}
	}
	if _, err := k.Open(v[:len(v)-1], "endpoint-secrets:we_1"); err == nil {
		t.Error("a truncated value opened")
	}
}

func TestAnotherKeyFailsClearly(t *testing.T) {
	a, _ := Random()
	b, _ := Random()
	v := a.Seal([]byte("x"), "signing-key")
	_, err := b.Open(v, "signing-key")
	if !errors.Is(err, ErrWrongKey) || !strings.Contains(err.Error(), a.ID()) || !strings.Contains(err.Error(), b.ID()) {
		t.Fatalf("opened with another key: %v", err)
	}
}

func TestParse(t *testing.T) {
	raw := bytes.Repeat([]byte{7}, KeySize)
	k, err := Parse(" " + base64.StdEncoding.EncodeToString(raw) + "\n")
	if err != nil {
		t.Fatal(err)
	}
	same, _ := New(raw)
	if k.ID() != same.ID() || len(k.ID()) != 16 {
		t.Errorf("ids %q and %q", k.ID(), same.ID())
	}
	for _, bad := range []string{
		"",
		"REPLACE_ME_WITH_OPENSSL_RAND_BASE64_32",
		base64.StdEncoding.EncodeToString(raw[:16]),
		base64.StdEncoding.EncodeToString(append(raw, 1)),
		base64.RawStdEncoding.EncodeToString(raw),
		// Published in the repository, and 59 bytes anyway.
		"Y29tcG9zZS1kZW1vLXNpZ25pbmcta2V5Om5vdC1zZWNyZXQ6bmV2ZXItdXNlLWluLXByb2R1Y3Rpb24=",
	} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
}

// fuzzKey is fixed so that the corpus's sealed values stay valid.
var fuzzKey, _ = New(bytes.Repeat([]byte{0x42}, KeySize))

// Open on hostile input never panics and never returns a plaintext that
// was not sealed under the key for that place.
func FuzzOpen(f *testing.F) {
	const what, plaintext = "signing-key", "the one sealed plaintext"
	good := fuzzKey.Seal([]byte(plaintext), what)
	f.Add(good, what)
	f.Add(good, "endpoint-secrets:we_1")
	f.Add([]byte("pgws1:"), "")
	f.Add([]byte("pgws1:0123456789abcdef:"), what)
	f.Add([]byte("pgws1:"+fuzzKey.ID()+":AAAA"), what)
	f.Add([]byte("not sealed at all"), what)
	f.Fuzz(func(t *testing.T, value []byte, w string) {
		pt, err := fuzzKey.Open(value, w)
		if err != nil {
			if pt != nil {
				t.Fatalf("an error with a plaintext %q", pt)
			}
			return
		}
		if w != what || string(pt) != plaintext {
			t.Fatalf("opened %q as %q: %q", value, w, pt)
		}
		if !bytes.HasPrefix(value, []byte("pgws1:"+fuzzKey.ID()+":")) {
			t.Fatalf("opened %q without its key id", value)
		}
	})
}

// A key file is generated once, mode 0600, and read back after; one
// already there is never replaced, and one that is not a key is refused.
func TestKeyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "secrets.key")
	k, generated, err := KeyFile(path)
	if err != nil || !generated {
		t.Fatalf("first read: %v, generated %v", err, generated)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the file: %v, %v", fi, err)
	}
	again, generated, err := KeyFile(path)
	if err != nil || generated || again.ID() != k.ID() {
		t.Fatalf("second read: %v, generated %v, same key %v", err, generated, again != nil && again.ID() == k.ID())
	}
	if err := os.WriteFile(path, []byte("not a key\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := KeyFile(path); err == nil {
		t.Error("a file that holds no key was taken")
	}
}
