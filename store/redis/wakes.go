package redis

import (
	"context"
	"errors"
)

// The wakes of the syncs (practice/readmodel.Wakes): a sync's name
// published on one channel, pgw:rm:wakes, which every instance subscribes
// to, so that the instance holding a sync's lease reads at once what a
// vendor's notification told another. Nothing is kept: a wake lost (an
// instance between subscriptions) is made good by the holder's own look
// every few seconds.
const channelWakes = "pgw:rm:wakes"

// PublishWake tells every instance to wake the syncs of name.
func (s *Store) PublishWake(ctx context.Context, name string) error {
	ctx, cancel := s.lookup(ctx)
	defer cancel()
	return s.rdb.Publish(ctx, channelWakes, name).Err()
}

// SubscribeWakes calls fn with each name published, until ctx ends or the
// subscription fails.
func (s *Store) SubscribeWakes(ctx context.Context, fn func(name string)) error {
	sub := s.rdb.Subscribe(ctx, channelWakes)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		return err
	}
	ch := sub.Channel()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case m, ok := <-ch:
			if !ok {
				return errors.New("redis: the wakes' subscription closed")
			}
			fn(m.Payload)
		}
	}
}
