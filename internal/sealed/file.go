package sealed

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// KeyFile reads the key kept in the file at path, generating it (mode
// 0600) the first time: the key of a gateway alone that is configured with
// none, kept beside its database but not in it.
func KeyFile(path string) (key *Key, generated bool, err error) {
	if b, err := os.ReadFile(path); err == nil {
		k, err := Parse(string(b))
		if err != nil {
			return nil, false, fmt.Errorf("%s: %w", path, err)
		}
		return k, false, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, false, err
	}
	// Written aside and linked into place, so that the file is never seen
	// half written and a key already there is never replaced.
	k, text := Random()
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return nil, false, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.WriteString(text + "\n"); err != nil {
		tmp.Close()
		return nil, false, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return nil, false, err
	}
	if err := tmp.Close(); err != nil {
		return nil, false, err
	}
	if err := os.Link(tmp.Name(), path); errors.Is(err, fs.ErrExist) {
		return KeyFile(path)
	} else if err != nil {
		return nil, false, err
	}
	return k, true, nil
}
