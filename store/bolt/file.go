package bolt

import (
	"fmt"
	"time"

	"go.etcd.io/bbolt"

	"github.com/practicegw/practicegw/dispatcher"
)

// File is the embedded database a gateway keeps its state in: one bbolt
// file, locked to one process. Opening it here keeps the bbolt client in
// its one home; the gateway holds the File, and the demo records keep
// their buckets in its DB.
type File struct {
	DB *bbolt.DB
}

// OpenFile opens (or creates, mode 0600) the database at path, waiting at
// most timeout for another process to let go of its lock.
func OpenFile(path string, timeout time.Duration) (*File, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: timeout})
	if err != nil {
		return nil, err
	}
	return &File{DB: db}, nil
}

// Path is where the file is.
func (f *File) Path() string { return f.DB.Path() }

// Ping reads the file, for readiness.
func (f *File) Ping() error { return f.DB.View(func(*bbolt.Tx) error { return nil }) }

// TxIntake is the engine's intake of change records written in the
// file's own transactions (the demo records'): their events and
// deliveries are written in the same transaction (dispatcher.TxIntake).
func (s *Store) TxIntake(e *dispatcher.Engine) *dispatcher.TxIntake[*bbolt.Tx] {
	return dispatcher.NewTxIntake[*bbolt.Tx](e, s)
}

// Close closes the file.
func (f *File) Close() error {
	if err := f.DB.Close(); err != nil {
		return fmt.Errorf("closing %s: %w", f.DB.Path(), err)
	}
	return nil
}
