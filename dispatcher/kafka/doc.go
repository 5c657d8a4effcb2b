// Package kafka runs the webhook pipeline through Kafka: the gateway
// publishes change records, and any number of dispatchers consume them as
// one consumer group, turn them into events and deliver those from a
// shared store (Redis in production).
//
// # Topics and keys
//
// Two topics, both keyed by resource id (so that each record's history
// stays in order on one partition) with the Java client's murmur2
// partitioner (so that a firm's own CDC connector, publishing with a Java
// or librdkafka client, puts a resource on the same partition as the
// gateway does):
//
//   - changes (default practicegw.changes): change records, the JSON form
//     of practice.Change. The gateway's outbox drains into it (Publisher);
//     a firm's CDC connector may publish into it too. The dispatchers
//     consume it.
//   - events (default practicegw.events): every event derived from a
//     change, as its webhook envelope. Nothing in practicegw consumes it:
//     it is the ordered, replayable stream of events for whoever wants
//     them without webhooks (analytics, a data lake). Events are derived
//     only from change records, in one place (dispatcher.Derive), so a
//     second consumer reading events back in would only add a hop.
//
// # Commit points
//
// Each dispatcher runs one goroutine per partition assigned to it
// (kafka-go consumer-group generations). For a batch of the changes
// already fetched from its partition it
//
//  1. derives the events (a change that can never become events is
//     logged, counted and skipped: retrying it cannot help),
//  2. produces them to the events topic, acknowledged by all in-sync
//     replicas,
//  3. records them and queues their deliveries in the store
//     (Engine.IngestEvents), and only then
//  4. marks the offset after the batch's last change for commit. One
//     committer per generation commits the partitions' marks together
//     every 200ms, and once more when the generation ends.
//
// A failure at 2 or 3 is retried, never skipped, so no later offset is
// committed past a change that is not durable. A dispatcher killed at any
// moment loses nothing: the next owner of the partition starts from the
// last commit and does steps 1 to 3 again, and event and delivery ids are
// derived from the change id, so the repeat records and queues nothing new
// (the events topic may hold a duplicate, with the same id; its readers
// de-duplicate on id as webhook receivers do).
//
// When a partition is revoked (a rebalance) or the dispatcher stops, its
// goroutine finishes the batch in hand, within DrainTimeout, and returns;
// the committer then commits what the partitions marked, and the next
// generation starts only when every goroutine of the last has returned. A
// batch that cannot finish in time is not marked.
//
// Delivery itself is the engine's business (dispatcher.Engine.Run): it
// claims due deliveries from the shared store under leases, so the
// dispatchers also share deliveries, whichever of them ingested the
// change.
package kafka
