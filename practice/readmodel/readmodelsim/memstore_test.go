package readmodelsim_test

import (
	"testing"

	"github.com/practicegw/practicegw/practice/readmodel"
	"github.com/practicegw/practicegw/practice/readmodel/readmodelsim"
	"github.com/practicegw/practicegw/store/storetest"
)

// The simulation's store keeps the same promises as bbolt and Redis.
func TestStoreConformance(t *testing.T) {
	t.Run("records", func(t *testing.T) {
		storetest.ReadModel(t, func(t *testing.T) (readmodel.Store, readmodel.Store) {
			s := readmodelsim.NewStore(nil)
			return s, s
		})
	})
	t.Run("feed", func(t *testing.T) {
		storetest.ReadModelFeed(t, func(t *testing.T) storetest.ReadModelFeedBackend {
			s := readmodelsim.NewStore(nil)
			return storetest.ReadModelFeedBackend{Store: s, Feed: s, Trim: s.Trim}
		})
	})
	t.Run("checkpoints", func(t *testing.T) {
		storetest.Checkpoints(t, func(t *testing.T) (readmodel.Checkpoints, readmodel.Checkpoints) {
			s := readmodelsim.NewStore(nil)
			return s, s
		})
	})
	t.Run("leases", func(t *testing.T) {
		storetest.Leases(t, func(t *testing.T) (readmodel.Leases, readmodel.Leases) {
			s := readmodelsim.NewStore(nil)
			return s, s
		})
	})
	t.Run("fenced", func(t *testing.T) {
		storetest.FencedCheckpoints(t, func(t *testing.T) (storetest.LeasedCheckpoints, storetest.LeasedCheckpoints) {
			s := readmodelsim.NewStore(nil)
			return s, s
		})
	})
}
