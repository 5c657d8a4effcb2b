package kafka_test

import (
	"context"
	"strings"
	"testing"

	"github.com/practicegw/practicegw/dispatcher/kafka"
)

// Run refuses a configuration without brokers or without what opens the
// shared state, saying which, before it opens or dials anything.
func TestRunRefusesAnIncompleteConfig(t *testing.T) {
	opened := false
	open := func(context.Context) (kafka.Shared, error) {
		opened = true
		return nil, context.Canceled
	}
	for _, c := range []struct {
		cfg  kafka.Config
		want string
	}{
		{kafka.Config{Open: open}, "Config.Brokers"},
		{kafka.Config{Brokers: []string{"127.0.0.1:1"}}, "Config.Open"},
		{kafka.Config{Brokers: []string{"127.0.0.1:1"}, Open: open, Topics: kafka.Topics{Changes: "t", Events: "t"}}, "they must differ"},
	} {
		if err := kafka.Run(context.Background(), c.cfg); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Run(%+v) = %v, want %q", c.cfg, err, c.want)
		}
	}
	if opened {
		t.Error("Run opened the shared state with a configuration it refuses")
	}
}
