package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"
	"go.uber.org/zap"

	"github.com/practicegw/practicegw/caddymodule/gateway"
	"github.com/practicegw/practicegw/dispatcher"
	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/internal/sealed"
	"github.com/practicegw/practicegw/practice"
	redisstore "github.com/practicegw/practicegw/store/redis"
)

// kafkaInfra is what every Kafka-mode run shares: a three-broker kfake
// cluster in this process and a redis-server.
type kafkaInfra struct {
	cluster  *kfake.Cluster
	brokers  []string
	redisURL string
	rdb      *redis.Client
	stop     func()
	runs     int
}

func startKafkaInfra(redisURL string) (*kafkaInfra, error) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(3))
	if err != nil {
		return nil, err
	}
	k := &kafkaInfra{cluster: cluster, brokers: cluster.ListenAddrs(), redisURL: redisURL, stop: func() {}}
	if redisURL == "" {
		if k.redisURL, k.stop, err = startRedis(); err != nil {
			cluster.Close()
			return nil, err
		}
	}
	opts, err := redis.ParseURL(k.redisURL)
	if err != nil {
		k.close()
		return nil, err
	}
	k.rdb = redis.NewClient(opts)
	return k, nil
}

func (k *kafkaInfra) close() {
	if k.rdb != nil {
		k.rdb.Close()
	}
	k.stop()
	k.cluster.Close()
}

// startRedis runs a redis-server as the compose file does: append-only
// file on, fsync every second.
func startRedis() (string, func(), error) {
	dir, err := os.MkdirTemp("", "practicegw-bench-redis-")
	if err != nil {
		return "", nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("starting redis-server (is it installed?): %w", err)
	}
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	url := fmt.Sprintf("redis://127.0.0.1:%d/0", port)
	opts, _ := redis.ParseURL(url)
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	for deadline := time.Now().Add(5 * time.Second); ; {
		if rdb.Ping(context.Background()).Err() == nil {
			return url, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", nil, fmt.Errorf("redis-server on port %d did not start", port)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kafkaPipeline is the scaled-out deployment in one process: the gateway
// (demo records and outbox in bbolt, draining to the changes topic) and
// one `practicegw dispatcher` (consumer and delivery on Redis).
type kafkaPipeline struct {
	*gatewayDB
	infra   *kafkaInfra
	cfg     kafka.Config
	pub     *kafka.Publisher
	gateway *dispatcher.Engine
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func (k *kafkaInfra) open(ctx context.Context) (pipeline, error) {
	k.runs++
	if err := k.rdb.FlushDB(ctx).Err(); err != nil {
		return nil, err
	}
	topics := kafka.Topics{Changes: fmt.Sprintf("bench%d.changes", k.runs), Events: fmt.Sprintf("bench%d.events", k.runs)}
	if err := kafka.EnsureTopics(ctx, k.brokers, kafka.Security{}, topics, kafka.DefaultPartitions); err != nil {
		return nil, err
	}
	g, err := openGatewayDB()
	if err != nil {
		return nil, err
	}
	secrets, _ := sealed.Random()
	// The dispatcher opens Redis as practicegw dispatcher does.
	shared := gateway.DispatcherRedis{URL: k.redisURL, Secrets: secrets}
	store, err := redisstore.New(k.rdb, redisstore.Options{Secrets: secrets})
	if err != nil {
		g.close()
		return nil, err
	}
	gateway, err := dispatcher.New(engineConfig(), store.Backends())
	if err != nil {
		g.close()
		return nil, err
	}
	reg := prometheus.NewRegistry()
	return &kafkaPipeline{
		gatewayDB: g,
		infra:     k,
		cfg: kafka.Config{
			Brokers: k.brokers, Open: shared.Open, Topics: topics,
			Group: fmt.Sprintf("bench%d", k.runs), Engine: engineConfig(), Logger: zap.NewNop(), Registerer: reg, Gatherer: reg,
		},
		pub:     kafka.NewPublisher(kafka.PublisherConfig{Brokers: k.brokers, Topic: topics.Changes}),
		gateway: gateway,
	}, nil
}

func (p *kafkaPipeline) endpoint(ctx context.Context, url string) error {
	_, _, err := p.gateway.CreateEndpoint(ctx, tenant, dispatcher.EndpointInput{URL: url, Events: []string{"*"}})
	return err
}

func (p *kafkaPipeline) preload(ctx context.Context, n int) ([]string, error) {
	ids := make([]string, 0, n)
	var batch []practice.Change
	for i := range n {
		c := syntheticChange()
		ids = append(ids, c.ResourceID)
		batch = append(batch, c)
		if len(batch) == 1000 || i == n-1 {
			if err := p.pub.PublishBatch(ctx, batch); err != nil {
				return nil, err
			}
			batch = batch[:0]
		}
	}
	return ids, nil
}

func (p *kafkaPipeline) start(ctx context.Context) {
	ctx, p.cancel = context.WithCancel(ctx)
	for _, run := range []func(context.Context) error{
		func(ctx context.Context) error { return kafka.Run(ctx, p.cfg) },
		func(ctx context.Context) error {
			return dispatcher.DrainOutboxTo(ctx, p.records, p.pub.PublishBatch, zap.NewNop())
		},
	} {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			if err := run(ctx); err != nil {
				fmt.Println("kafka pipeline:", err)
			}
		}()
	}
}

func (p *kafkaPipeline) close() {
	if p.cancel != nil {
		p.cancel()
	}
	p.wg.Wait()
	p.pub.Close()
	p.gateway.Close()
	p.gatewayDB.close()
}
