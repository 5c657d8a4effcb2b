package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/practicegw/practicegw/dispatcher/kafka"
	"github.com/practicegw/practicegw/internal/sealed"
)

// system is one mode's processes, started afresh for a run.
type system struct {
	api   string // base URL of the gateway's API
	token string
	dir   string
	procs []*exec.Cmd
	// redisPID is the Kafka mode's redis-server, counted with the
	// product's processes.
	redisPID int
}

// pids are the processes whose CPU and memory a run counts.
func (s *system) pids() []int {
	var out []int
	for _, p := range s.procs {
		out = append(out, p.Process.Pid)
	}
	if s.redisPID != 0 {
		out = append(out, s.redisPID)
	}
	return out
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// startSystem runs the gateway on the repository's Caddyfile with a fresh
// data directory, and in the Kafka mode a dispatcher beside it, and issues
// the credential the run calls the API with.
func startSystem(ctx context.Context, bin, mode string, infra *kafkaInfra) (*system, error) {
	dir, err := os.MkdirTemp("", "practicegw-bench-pipeline-")
	if err != nil {
		return nil, err
	}
	s := &system{dir: dir}
	listen, err := freeAddr()
	if err != nil {
		return nil, err
	}
	admin, err := freeAddr()
	if err != nil {
		return nil, err
	}
	env := append(os.Environ(),
		"PRACTICEGW_LISTEN="+listen, "PRACTICEGW_ADMIN="+admin, "PRACTICEGW_DATA="+filepath.Join(dir, "data"),
		"PRACTICEGW_WEBHOOK_ALLOW_CIDRS=127.0.0.0/8", "PRACTICEGW_REDIS=", "PRACTICEGW_KAFKA=", "PRACTICEGW_SECRETS_KEY=")
	if mode == "kafka" {
		shared, err := infra.run(ctx)
		if err != nil {
			s.close()
			return nil, err
		}
		env = append(env, shared...)
		s.redisPID = infra.redisPID
	}
	gwEnv := env
	if mode == "kafka" {
		gwEnv = append(append([]string(nil), env...), "PRACTICEGW_DISPATCH=off")
	}
	if err := s.spawn(gwEnv, filepath.Join(dir, "gateway.log"), "run", "--config", "Caddyfile", "--adapter", "caddyfile"); err != nil {
		s.close()
		return nil, err
	}
	s.api = "http://" + listen
	if err := waitHTTP(s.api+"/healthz", 60*time.Second); err != nil {
		s.close()
		return nil, fmt.Errorf("gateway: %w (its log: %s)", err, filepath.Join(dir, "gateway.log"))
	}
	if mode == "kafka" {
		probe, err := freeAddr()
		if err != nil {
			s.close()
			return nil, err
		}
		if err := s.spawn(env, filepath.Join(dir, "dispatcher.log"), "dispatcher", "--listen", probe); err != nil {
			s.close()
			return nil, err
		}
		if err := waitHTTP("http://"+probe+"/readyz", 60*time.Second); err != nil {
			s.close()
			return nil, fmt.Errorf("dispatcher: %w", err)
		}
	}
	out, err := exec.CommandContext(ctx, bin, "credential", "issue", "--admin", admin, "--firm", "frm_acme", "--name", "bench",
		"--scopes", "jobs:read,jobs:write,webhooks:read,webhooks:write,events:read", "--rate-limit", "100000000/h", "--json").Output()
	if err != nil {
		s.close()
		return nil, fmt.Errorf("issuing a credential: %w", err)
	}
	var cred struct{ Token string }
	if err := json.Unmarshal(out, &cred); err != nil || cred.Token == "" {
		s.close()
		return nil, fmt.Errorf("issuing a credential: %q", out)
	}
	s.token = cred.Token
	return s, nil
}

func (s *system) spawn(env []string, logPath string, args ...string) error {
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd := exec.Command(binPath, args...)
	cmd.Env, cmd.Stdout, cmd.Stderr = env, log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return err
	}
	s.procs = append(s.procs, cmd)
	return nil
}

// close stops the processes, the dispatcher first, as their supervisor
// would, and removes the data.
func (s *system) close() {
	for i := len(s.procs) - 1; i >= 0; i-- {
		p := s.procs[i]
		p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			p.Process.Kill()
			<-done
		}
	}
	os.RemoveAll(s.dir)
}

func waitHTTP(url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not answer 200 within %s", url, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// binPath is the binary every process of a run is started from.
var binPath string

// kafkaInfra is what every Kafka-mode run shares: a three-broker kfake
// cluster in this process and a redis-server.
type kafkaInfra struct {
	cluster  *kfake.Cluster
	brokers  []string
	redisURL string
	redisPID int
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
		if err := k.startRedis(); err != nil {
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

// run prepares the shared state for one run (Redis flushed, topics of its
// own) and returns the environment the run's processes share.
func (k *kafkaInfra) run(ctx context.Context) ([]string, error) {
	k.runs++
	if err := k.rdb.FlushDB(ctx).Err(); err != nil {
		return nil, err
	}
	topics := kafka.Topics{Changes: fmt.Sprintf("bench%d.changes", k.runs), Events: fmt.Sprintf("bench%d.events", k.runs)}
	if err := kafka.EnsureTopics(ctx, k.brokers, kafka.Security{}, topics, kafka.DefaultPartitions); err != nil {
		return nil, err
	}
	_, key := sealed.Random()
	return []string{
		"PRACTICEGW_REDIS=" + k.redisURL, "PRACTICEGW_KAFKA=" + strings.Join(k.brokers, ","), "PRACTICEGW_SECRETS_KEY=" + key,
		"PRACTICEGW_KAFKA_CHANGES_TOPIC=" + topics.Changes, "PRACTICEGW_KAFKA_EVENTS_TOPIC=" + topics.Events,
		"PRACTICEGW_KAFKA_GROUP=" + fmt.Sprintf("bench%d", k.runs),
	}, nil
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
func (k *kafkaInfra) startRedis() error {
	dir, err := os.MkdirTemp("", "practicegw-bench-redis-")
	if err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	_, port, _ := net.SplitHostPort(addr)
	cmd := exec.Command("redis-server", "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "yes", "--appendfsync", "everysec")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return fmt.Errorf("starting redis-server (is it installed?): %w", err)
	}
	k.stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		os.RemoveAll(dir)
	}
	k.redisPID = cmd.Process.Pid
	k.redisURL = "redis://127.0.0.1:" + port + "/0"
	n, _ := strconv.Atoi(port)
	for deadline := time.Now().Add(5 * time.Second); ; {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", n)); err == nil {
			c.Close()
			return nil
		}
		if time.Now().After(deadline) {
			k.stop()
			return fmt.Errorf("redis-server on port %s did not start: %s", port, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
