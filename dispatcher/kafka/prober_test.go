package kafka_test

import (
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/practicegw/practicegw/dispatcher/kafka"
)

// countingProxy forwards connections to addr and counts them.
func countingProxy(t *testing.T, addr string) (string, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	var n atomic.Int64
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			b, err := net.Dial("tcp", addr)
			if err != nil {
				c.Close()
				continue
			}
			go func() { io.Copy(b, c); b.Close() }()
			go func() { io.Copy(c, b); c.Close() }()
		}
	}()
	return l.Addr().String(), &n
}

// Readiness reads the prober's last answer, and the prober keeps one
// connection however often it checks; when the cluster goes, the next
// check says so.
func TestProberKeepsOneConnection(t *testing.T) {
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	proxy, dials := countingProxy(t, cluster.ListenAddrs()[0])
	p := kafka.NewProber([]string{proxy}, kafka.Security{}, 0)
	ctx := context.Background()
	if ok, _ := p.Ready(); ok {
		t.Fatal("ready before any check")
	}
	for range 5 {
		p.Check(ctx)
		if ok, err := p.Ready(); !ok {
			t.Fatalf("not ready: %v", err)
		}
	}
	for range 100 {
		p.Ready()
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("%d connections for five checks and a hundred probes, want 1", n)
	}
	cluster.Close()
	p.Check(ctx)
	if ok, err := p.Ready(); ok || err == nil {
		t.Fatalf("ready after the cluster closed: %v, %v", ok, err)
	}
}
