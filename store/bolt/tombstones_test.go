package bolt_test

import (
	"testing"

	"github.com/practicegw/practicegw/store/storetest"
)

func TestTombstonesConformance(t *testing.T) {
	storetest.Tombstones(t, func(t *testing.T) (storetest.TombstoneBackend, storetest.TombstoneBackend) {
		st, db := open(t)
		return st.Tombstones(), reopen(t, db).Tombstones()
	})
}
