package redis_test

import (
	"testing"

	"github.com/practicegw/practicegw/internal/redistest"
	"github.com/practicegw/practicegw/store/storetest"
)

func TestTombstonesConformance(t *testing.T) {
	srv := redistest.Start(t)
	storetest.Tombstones(t, func(t *testing.T) (storetest.TombstoneBackend, storetest.TombstoneBackend) {
		return open(t, srv).Tombstones(), another(t, srv).Tombstones()
	})
}
