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
	"slices"
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
	// evalName starts every script call: EVALSHA and the script.
	evalName = "$7\r\nEVALSHA\r\n$40\r\n" + gcraSHA + "\r\n"
	// retentionArg is ARGV[1], the same in every call.
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

	// Scratch for a batch, kept to spare allocations: each credential's
	// number in the script's KEYS and the credentials in that order; the
	// batch's groups, by what they share and in order; each call's group;
	// and the decisions read back.
	credIndex  map[string]int
	creds      []string
	groupIndex map[groupKey]int
	groups     []group
	callGroup  []int
	decisions  []Decision
}

// group is requests of one batch that the script decides together: one
// credential's, under one rate, all booking or all only looking, at one
// clock. Redis does a group's work once however many requests it holds,
// so a busy credential costs Redis little more per batch than an idle one.
type group struct {
	groupKey
	k int   // the credential's number in KEYS, from 1
	n int64 // how many requests
	// From the reply, and used up as readBatch replays the group: the
	// TAT relative to the group's now, and how many of its requests Redis
	// admitted that the replay has yet to.
	tat, admitted int64
}

type groupKey struct {
	id      string
	cell    cell
	consume bool
	now     int64
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

		credIndex:  make(map[string]int),
		groupIndex: make(map[groupKey]int),
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

// writeBatch buffers one EVALSHA of the script that decides every call in
// calls. Calls that share a group travel as one, and each credential's keys
// appear once, written in pieces so that no key string is built. The
// script decides groups in order of their first call, and a group's calls
// in order.
func (c *scriptConn) writeBatch(calls []*scriptCall) {
	clear(c.credIndex)
	clear(c.groupIndex)
	c.creds, c.groups, c.callGroup = c.creds[:0], c.groups[:0], c.callGroup[:0]
	for _, call := range calls {
		key := groupKey{id: call.id, cell: call.cell, consume: call.consume, now: call.now}
		g, ok := c.groupIndex[key]
		if !ok {
			k, ok := c.credIndex[call.id]
			if !ok {
				c.creds = append(c.creds, call.id)
				k = len(c.creds) // Lua counts from 1
				c.credIndex[call.id] = k
			}
			g = len(c.groups)
			c.groups = append(c.groups, group{groupKey: key, k: k})
			c.groupIndex[key] = g
		}
		c.groups[g].n++
		c.callGroup = append(c.callGroup, g)
	}
	c.writeLen('*', 3+2*len(c.creds)+1+6*len(c.groups))
	c.w.WriteString(evalName)
	c.writeInt(int64(2 * len(c.creds)))
	for _, id := range c.creds {
		c.writeKey(rateKeyPrefix, id)
		c.writeKey(usageKeyPrefix, id)
	}
	c.w.WriteString(retentionArg)
	for _, g := range c.groups {
		c.writeInt(int64(g.k))
		c.writeInt(g.cell.interval)
		c.writeInt(g.cell.tolerance)
		if g.consume {
			c.w.WriteString("$1\r\n1\r\n")
		} else {
			c.w.WriteString("$1\r\n0\r\n")
		}
		c.writeInt(g.now)
		c.writeInt(g.n)
	}
}

// writeLen writes a RESP length line: *n for an array, $n for a string.
func (c *scriptConn) writeLen(kind byte, n int) {
	c.num = strconv.AppendInt(c.num[:0], int64(n), 10)
	c.w.WriteByte(kind)
	c.w.Write(c.num)
	c.w.WriteString("\r\n")
}

func (c *scriptConn) writeKey(prefix, id string) {
	c.writeLen('$', len(prefix)+len(id)+1)
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

// readBatch reads the reply to the script call writeBatch wrote last and
// gives each of its calls a decision, in order, good until the next
// readBatch. Redis sends what each group found and how many it admitted;
// each call's own numbers come from replaying the group in Go, which must
// admit exactly as many. An error reply comes back as errNoScript or a
// redisError; any other error means the connection can no longer be
// trusted.
func (c *scriptConn) readBatch() ([]Decision, error) {
	b, err := c.line()
	if err != nil {
		return nil, err
	}
	switch b[0] {
	case '-':
		return nil, replyError(b[1:])
	case '*':
		if m, ok := parseInt(b[1:]); !ok || m != 2*int64(len(c.groups)) {
			return nil, fmt.Errorf("rate limit script answered %q for %d groups", b, len(c.groups))
		}
	default:
		return nil, fmt.Errorf("rate limit script answered %q", b)
	}
	for i := range c.groups {
		g := &c.groups[i]
		if g.tat, err = c.integer(); err != nil {
			return nil, err
		}
		if g.admitted, err = c.integer(); err != nil {
			return nil, err
		}
		if g.tat < 0 || g.admitted < 0 || g.admitted > g.n {
			return nil, fmt.Errorf("rate limit script answered TAT %d and %d admitted for %d requests", g.tat, g.admitted, g.n)
		}
	}
	c.decisions = slices.Grow(c.decisions[:0], len(c.callGroup))
	for _, i := range c.callGroup {
		g := &c.groups[i]
		var d Decision
		g.tat, d = g.cell.step(g.tat, 0, g.consume)
		if g.consume && d.Allowed {
			g.admitted-- // one of those Redis admitted
		}
		c.decisions = append(c.decisions, d)
	}
	for _, g := range c.groups {
		if g.consume && g.admitted != 0 {
			return nil, fmt.Errorf("rate limit script and gateway disagree on %s: Redis admitted %d more", g.id, g.admitted)
		}
	}
	return c.decisions, nil
}

// integer reads one integer of a script's reply.
func (c *scriptConn) integer() (int64, error) {
	b, err := c.line()
	if err != nil {
		return 0, err
	}
	if b[0] == ':' {
		if n, ok := parseInt(b[1:]); ok {
			return n, nil
		}
	}
	return 0, fmt.Errorf("rate limit script answered %q in its array", b)
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
