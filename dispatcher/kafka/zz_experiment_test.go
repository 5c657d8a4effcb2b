package kafka

import (
	"context"
	"fmt"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kfake"
)

func TestExperiment(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	addrs := c.ListenAddrs()
	t.Log(addrs)
	conn, err := kafkago.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := conn.Controller()
	if err != nil {
		t.Fatal(err)
	}
	t.Log("controller", ctl)
	cc, err := kafkago.Dial("tcp", fmt.Sprintf("%s:%d", ctl.Host, ctl.Port))
	if err != nil {
		t.Fatal(err)
	}
	err = cc.CreateTopics(kafkago.TopicConfig{Topic: "chg", NumPartitions: 6, ReplicationFactor: 3})
	t.Log("create", err)
	err = cc.CreateTopics(kafkago.TopicConfig{Topic: "chg", NumPartitions: 6, ReplicationFactor: 3})
	t.Log("create again", err)
	parts, err := conn.ReadPartitions("chg")
	t.Log("partitions", len(parts), err)

	w := &kafkago.Writer{Addr: kafkago.TCP(addrs...), Topic: "chg", Balancer: &kafkago.Murmur2Balancer{}, RequiredAcks: kafkago.RequireAll, BatchTimeout: time.Millisecond}
	start := time.Now()
	for i := 0; i < 100; i++ {
		if err := w.WriteMessages(context.Background(), kafkago.Message{Key: []byte(fmt.Sprint("k", i)), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
	}
	t.Log("100 sync writes", time.Since(start))

	g, err := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{ID: "grp", Brokers: addrs, Topics: []string{"chg"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	gen, err := g.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("gen", gen.ID, gen.Assignments)
	got := make(chan kafkago.Message, 1000)
	for _, a := range gen.Assignments["chg"] {
		a := a
		gen.Start(func(ctx context.Context) {
			r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: addrs, Topic: "chg", Partition: a.ID, MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 500 * time.Millisecond})
			defer r.Close()
			r.SetOffset(a.Offset)
			for {
				m, err := r.FetchMessage(ctx)
				if err != nil {
					return
				}
				got <- m
				if err := gen.CommitOffsets(map[string]map[int]int64{"chg": {m.Partition: m.Offset + 1}}); err != nil {
					t.Log("commit", err)
				}
			}
		})
	}
	for i := 0; i < 100; i++ {
		<-got
	}
	t.Log("all read", time.Since(start))
	start = time.Now()
	w.WriteMessages(context.Background(), kafkago.Message{Key: []byte("x"), Value: []byte("late")})
	m := <-got
	t.Log("latency", time.Since(start), string(m.Value))
	g.Close()
	g2, _ := kafkago.NewConsumerGroup(kafkago.ConsumerGroupConfig{ID: "grp", Brokers: addrs, Topics: []string{"chg"}})
	gen2, err := g2.Next(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("gen2", gen2.ID, gen2.Assignments)
	g2.Close()
}
