// Package occupant finds the other processes that already listen on a TCP
// address or hold a lock on a file, so that a gateway refuses to start
// beside them rather than half-start: Caddy binds its listeners with
// SO_REUSEPORT (for graceful reloads), which lets a second process listen
// on the same address and the kernel split the connections between the
// two.
//
// It reads Linux's /proc (the sockets of /proc/net/tcp and tcp6, the
// locks of /proc/locks, and each process's /proc/<pid>/fd to name who
// holds them); elsewhere it finds nothing. A socket or lock this process
// holds is never another's, so a reload of the same process is never
// refused.
package occupant

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Process is another process holding an address or file; PID 0 when it
// could not be named (another user's process this one may not look at).
type Process struct {
	PID     int
	Command string
}

func (p Process) String() string {
	switch {
	case p.PID == 0:
		return "another process (not one this user may look at)"
	case p.Command == "":
		return fmt.Sprintf("process %d", p.PID)
	}
	return fmt.Sprintf("process %d (%s)", p.PID, p.Command)
}

// procRoot is where /proc is; tests point it elsewhere.
var procRoot = "/proc"

// Listening returns the other processes listening on addr (host:port;
// an empty host, 0.0.0.0 or :: is every address): a socket on the same
// port whose address is the same, or either of them every address.
func Listening(addr string) ([]Process, error) {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port == 0 {
		return nil, err
	}
	ips, err := hostIPs(host)
	if err != nil {
		return nil, err
	}
	var inodes []string
	for _, table := range []string{"net/tcp", "net/tcp6"} {
		socks, err := listeners(filepath.Join(procRoot, table))
		if err != nil {
			continue // no such table here (no IPv6, or not Linux)
		}
		for _, s := range socks {
			if s.port == port && overlaps(s.ip, ips) {
				inodes = append(inodes, "socket:["+s.inode+"]")
			}
		}
	}
	return others(inodes)
}

// Conflict is an address this process listens on where others listen
// too.
type Conflict struct {
	Addr string
	By   []Process
}

// Beside returns this process's listening addresses where another
// process listens too (on the same port, on the same address or either
// of them every address): the admin endpoint a second gateway bound
// beside the first, before it provisions anything else.
func Beside() ([]Conflict, error) {
	var all []socket
	for _, table := range []string{"net/tcp", "net/tcp6"} {
		socks, err := listeners(filepath.Join(procRoot, table))
		if err == nil {
			all = append(all, socks...)
		}
	}
	mine := fdLinks("self")
	var out []Conflict
	for _, s := range all {
		if !mine["socket:["+s.inode+"]"] {
			continue
		}
		var theirs []string
		for _, o := range all {
			if o.port == s.port && !mine["socket:["+o.inode+"]"] && (o.ip.IsUnspecified() || s.ip.IsUnspecified() || o.ip.Equal(s.ip)) {
				theirs = append(theirs, "socket:["+o.inode+"]")
			}
		}
		if by, err := others(theirs); err == nil && len(by) > 0 {
			out = append(out, Conflict{Addr: net.JoinHostPort(s.ip.String(), strconv.Itoa(s.port)), By: by})
		}
	}
	return out, nil
}

// Locking returns the other processes holding a lock on the file at path.
func Locking(path string) ([]Process, error) {
	fi, err := os.Stat(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil, nil
		}
		return nil, err
	}
	ino, ok := inode(fi)
	if !ok {
		return nil, nil
	}
	f, err := os.Open(filepath.Join(procRoot, "locks"))
	if err != nil {
		return nil, nil
	}
	defer f.Close()
	want := strconv.FormatUint(ino, 10)
	self := os.Getpid()
	var out []Process
	seen := map[int]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF", or with
		// "->" for a waiter.
		fields := strings.Fields(strings.Replace(sc.Text(), "->", "", 1))
		if len(fields) < 6 {
			continue
		}
		dev := strings.Split(fields[5], ":")
		pid, _ := strconv.Atoi(fields[4])
		if len(dev) != 3 || dev[2] != want || pid == self || pid <= 0 || seen[pid] {
			continue
		}
		seen[pid] = true
		out = append(out, Process{PID: pid, Command: command(pid)})
	}
	return out, sc.Err()
}

// Describe says who holds what, for a refusal: "process 1234
// (practicegw)", several joined by "and".
func Describe(ps []Process) string {
	parts := make([]string, len(ps))
	for i, p := range ps {
		parts[i] = p.String()
	}
	return strings.Join(parts, " and ")
}

type socket struct {
	ip    net.IP
	port  int
	inode string
}

// listeners reads the listening sockets of a /proc/net/tcp table.
func listeners(path string) ([]socket, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []socket
	sc := bufio.NewScanner(f)
	sc.Scan() // the header
	for sc.Scan() {
		// "sl local_address rem_address st tx_queue rx_queue tr tm->when
		// retrnsmt uid timeout inode ..."; st 0A is LISTEN.
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" {
			continue
		}
		ipHex, portHex, ok := strings.Cut(fields[1], ":")
		port, err := strconv.ParseUint(portHex, 16, 16)
		ip := kernelIP(ipHex)
		if !ok || err != nil || ip == nil {
			continue
		}
		out = append(out, socket{ip: ip, port: int(port), inode: fields[9]})
	}
	return out, sc.Err()
}

// kernelIP reads an address as /proc/net/tcp writes it: each 32-bit word
// in the host's (little-endian) order.
func kernelIP(h string) net.IP {
	b, err := hex.DecodeString(h)
	if err != nil || len(b)%4 != 0 || (len(b) != 4 && len(b) != 16) {
		return nil
	}
	for i := 0; i < len(b); i += 4 {
		b[i], b[i+1], b[i+2], b[i+3] = b[i+3], b[i+2], b[i+1], b[i]
	}
	return net.IP(b)
}

// hostIPs are the addresses a listen host names: none for every address.
func hostIPs(host string) ([]net.IP, error) {
	if host == "" {
		return nil, nil
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsUnspecified() {
			return nil, nil
		}
		return []net.IP{ip}, nil
	}
	return net.LookupIP(host)
}

// overlaps reports whether a socket on ip takes connections meant for
// one of ips (none: every address).
func overlaps(ip net.IP, ips []net.IP) bool {
	if ip.IsUnspecified() || len(ips) == 0 {
		return true
	}
	for _, want := range ips {
		if ip.Equal(want) {
			return true
		}
	}
	return false
}

// others names the processes other than this one whose descriptors are
// among links ("socket:[123]"); a socket none of the processes this one
// may look at holds is another user's.
func others(links []string) ([]Process, error) {
	if len(links) == 0 {
		return nil, nil
	}
	want := map[string]bool{}
	for _, l := range links {
		want[l] = true
	}
	// This process's own are no one else's.
	for l := range fdLinks("self") {
		delete(want, l)
	}
	if len(want) == 0 {
		return nil, nil
	}
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return []Process{{}}, nil
	}
	self := os.Getpid()
	var out []Process
	found := map[string]bool{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		held := false
		for l := range fdLinks(e.Name()) {
			if want[l] {
				held, found[l] = true, true
			}
		}
		if held {
			out = append(out, Process{PID: pid, Command: command(pid)})
		}
	}
	if len(found) < len(want) {
		out = append(out, Process{})
	}
	return out, nil
}

// fdLinks are what the descriptors of process pid ("self" for this one)
// point at.
func fdLinks(pid string) map[string]bool {
	dir := filepath.Join(procRoot, pid, "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	out := make(map[string]bool, len(entries))
	for _, e := range entries {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil {
			out[l] = true
		}
	}
	return out
}

// command is the name of process pid's program, "" when it cannot be read.
func command(pid int) string {
	b, err := os.ReadFile(filepath.Join(procRoot, strconv.Itoa(pid), "comm"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
