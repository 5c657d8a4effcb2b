package ratelimit

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The script calls travel on a connection of their own, spoken to in RESP
// directly. Even pipelined, go-redis builds a command object, boxes every
// argument and unboxes every reply: about 17 allocations and 2.5µs of CPU
// a call on the benchmark machine, as much again as the rest of the round
// trip. Here a call is written straight into the connection's buffer and
// its reply read straight out of the other, with no allocation for either.

// gcraSHA is the script's SHA1, the name EVALSHA runs it by.
var gcraSHA = func() string { s := sha1.Sum([]byte(gcraSource)); return hex.EncodeToString(s[:]) }()

const (
	rateKeyPrefix  = "pgw:rl:{"
	usageKeyPrefix = "pgw:usage:{"
)

var (
	// evalHead starts every script call: EVALSHA, the script, two keys.
	evalHead = "*10\r\n$7\r\nEVALSHA\r\n$40\r\n" + gcraSHA + "\r\n$1\r\n2\r\n"
	// retentionArg is ARGV[5], the same in every call.
	retentionArg = bulk(strconv.Itoa(retentionHours))
	// scriptLoad loads the script; Redis answers with its SHA1.
	scriptLoad = "*3\r\n$6\r\nSCRIPT\r\n$4\r\nLOAD\r\n" + bulk(gcraSource)
)

func bulk(s string) string { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }

// errNoScript is Redis's answer to EVALSHA when it does not hold the
// script: after a restart, a failover or SCRIPT FLUSH.
var errNoScript = errors.New("NOSCRIPT: redis does not hold the rate limit script")

// redisError is an error reply. Redis answered, so the connection is still
// in step and the calls after it are answered as usual.
type redisError string

func (e redisError) Error() string { return "redis: " + string(e) }

// scriptConn is one connection to Redis, used by one goroutine at a time.
type scriptConn struct {
	nc  net.Conn
	w   *bufio.Writer
	r   *bufio.Reader
	num []byte // scratch for formatting integers
}

// connBufSize holds a full batch's calls, or its replies, so that a batch
// is one write and, usually, one read.
const connBufSize = 64 << 10

// endpoint is what the Redis URL says about reaching Redis.
type endpoint struct {
	network, addr      string
	tls                *tls.Config
	username, password string
	db                 int
}

func endpointOf(opt *redis.Options) endpoint {
	e := endpoint{network: opt.Network, addr: opt.Addr, tls: opt.TLSConfig,
		username: opt.Username, password: opt.Password, db: opt.DB}
	if e.network == "" {
		e.network = "tcp"
	}
	return e
}

// dialScriptConn connects, logs in and selects the database, all before
// deadline.
func dialScriptConn(ctx context.Context, e endpoint, deadline time.Time) (*scriptConn, error) {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	var d net.Dialer
	nc, err := d.DialContext(ctx, e.network, e.addr)
	if err != nil {
		return nil, err
	}
	if e.tls != nil {
		tc := tls.Client(nc, e.tls)
		if err := tc.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, err
		}
		nc = tc
	}
	c := &scriptConn{
		nc:  nc,
		w:   bufio.NewWriterSize(nc, connBufSize),
		r:   bufio.NewReaderSize(nc, connBufSize),
		num: make([]byte, 0, 20),
	}
	var hello []string
	switch {
	case e.username != "":
		hello = append(hello, command("AUTH", e.username, e.password))
	case e.password != "":
		hello = append(hello, command("AUTH", e.password))
	}
	if e.db != 0 {
		hello = append(hello, command("SELECT", strconv.Itoa(e.db)))
	}
	if len(hello) == 0 {
		return c, nil
	}
	nc.SetDeadline(deadline)
	for _, cmd := range hello {
		c.w.WriteString(cmd)
	}
	err = c.w.Flush()
	for range hello {
		if err != nil {
			break
		}
		err = c.readStatus()
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("redis handshake: %w", err)
	}
	return c, nil
}

func command(args ...string) string {
	s := "*" + strconv.Itoa(len(args)) + "\r\n"
	for _, a := range args {
		s += bulk(a)
	}
	return s
}

func (c *scriptConn) close() error { return c.nc.Close() }

// writeCall buffers one EVALSHA of the script. The keys are rateKey and
// usageKey, written in pieces so that no key string is built.
func (c *scriptConn) writeCall(call *scriptCall) {
	c.w.WriteString(evalHead)
	c.writeKey(rateKeyPrefix, call.id)
	c.writeKey(usageKeyPrefix, call.id)
	c.writeInt(call.cell.interval)
	c.writeInt(call.cell.tolerance)
	if call.consume {
		c.w.WriteString("$5\r\nallow\r\n")
	} else {
		c.w.WriteString("$4\r\npeek\r\n")
	}
	c.writeInt(call.now)
	c.w.WriteString(retentionArg)
}

func (c *scriptConn) writeKey(prefix, id string) {
	c.num = strconv.AppendInt(c.num[:0], int64(len(prefix)+len(id)+1), 10)
	c.w.WriteByte('$')
	c.w.Write(c.num)
	c.w.WriteString("\r\n")
	c.w.WriteString(prefix)
	c.w.WriteString(id)
	c.w.WriteString("}\r\n")
}

func (c *scriptConn) writeInt(n int64) {
	c.num = strconv.AppendInt(c.num[:0], n, 10)
	c.w.WriteByte('$')
	c.w.WriteString(strconv.Itoa(len(c.num))) // at most 20: no allocation
	c.w.WriteString("\r\n")
	c.w.Write(c.num)
	c.w.WriteString("\r\n")
}

// line reads one line of a reply, without its CRLF. It points into the
// read buffer, so it is only good until the next read.
func (c *scriptConn) line() ([]byte, error) {
	b, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(b) < 3 || b[len(b)-2] != '\r' {
		return nil, fmt.Errorf("redis sent a malformed reply %q", b)
	}
	return b[:len(b)-2], nil
}

// readDecision reads the reply to one script call. An error reply comes
// back as errNoScript or a redisError; any other error means the
// connection can no longer be trusted.
func (c *scriptConn) readDecision() (Decision, error) {
	b, err := c.line()
	if err != nil {
		return Decision{}, err
	}
	switch b[0] {
	case '-':
		return Decision{}, replyError(b[1:])
	case '*':
		if n, ok := parseInt(b[1:]); !ok || n != 4 {
			return Decision{}, fmt.Errorf("rate limit script answered %q", b)
		}
	default:
		return Decision{}, fmt.Errorf("rate limit script answered %q", b)
	}
	var v [4]int64
	for i := range v {
		b, err := c.line()
		if err != nil {
			return Decision{}, err
		}
		n, ok := int64(0), false
		if b[0] == ':' {
			n, ok = parseInt(b[1:])
		}
		if !ok {
			return Decision{}, fmt.Errorf("rate limit script answered %q in its array", b)
		}
		v[i] = n
	}
	return Decision{Allowed: v[0] == 1, Remaining: v[1], Reset: usec(v[2]), RetryAfter: usec(v[3])}, nil
}

// readLoaded reads the reply to SCRIPT LOAD: the SHA1, or an error reply.
func (c *scriptConn) readLoaded() error {
	b, err := c.line()
	if err != nil {
		return err
	}
	switch b[0] {
	case '-':
		return replyError(b[1:])
	case '$':
		if n, ok := parseInt(b[1:]); ok && n == int64(len(gcraSHA)) {
			_, err := c.line()
			return err
		}
	}
	return fmt.Errorf("redis answered SCRIPT LOAD with %q", b)
}

// readStatus reads a +OK or an error reply.
func (c *scriptConn) readStatus() error {
	b, err := c.line()
	if err != nil {
		return err
	}
	switch b[0] {
	case '+':
		return nil
	case '-':
		return replyError(b[1:])
	}
	return fmt.Errorf("redis answered %q", b)
}

func replyError(msg []byte) error {
	if bytes.HasPrefix(msg, []byte("NOSCRIPT")) {
		return errNoScript
	}
	return redisError(msg)
}

// isReplyError says whether err is Redis's answer to one call, which
// leaves the connection usable.
func isReplyError(err error) bool {
	var re redisError
	return err == errNoScript || errors.As(err, &re)
}

// parseInt reads a RESP integer; strconv would need a string, and so an
// allocation per reply.
func parseInt(b []byte) (int64, bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
		return 0, false
	}
	var n int64
	for _, ch := range b {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		n = n*10 + int64(ch-'0')
	}
	if neg {
		n = -n
	}
	return n, true
}
