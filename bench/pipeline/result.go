package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// result is one run's figures.
type result struct {
	// lat is from the API's answer to the webhook's arrival (0 when the
	// webhook came first), e2e from the call's start, api the call.
	lat, e2e, api  []time.Duration
	rate           float64
	unit           string
	missing        int
	failed         int
	dups, badSig   int
	cpuPerDelivery time.Duration
	peakMiB        float64
	loadStart      string
	loadEnd        string
	note           string
}

func (r result) print(mode, name string, fl floor) {
	lat, api, e2e := spreadOf(r.lat), spreadOf(r.api), spreadOf(r.e2e)
	fmt.Printf("%-9s %-28s %9s %9s %9s %9s %8.0f/s %8s %6.0fMiB  %s -> %s\n", mode, name,
		fmtDur(lat.p50), fmtDur(lat.p99), fmtDur(api.p50), fmtDur(api.p99), r.rate,
		fmtDur(r.cpuPerDelivery), r.peakMiB, r.loadStart, r.loadEnd)
	least := fl.commit.p50 + fl.http.p50
	extra := []string{fmt.Sprintf("call start -> webhook p50 %s = %.1fx the floor's commit + round trip (%s)",
		fmtDur(e2e.p50), float64(e2e.p50)/float64(least), fmtDur(least))}
	if r.note != "" {
		extra = append(extra, r.note)
	}
	if r.missing > 0 || r.failed > 0 || r.dups > 0 || r.badSig > 0 {
		extra = append(extra, fmt.Sprintf("%d never arrived, %d calls failed, %d arrived twice, %d bad signatures",
			r.missing, r.failed, r.dups, r.badSig))
	}
	fmt.Printf("%-9s %-28s %s\n", "", "", strings.Join(extra, "; "))
}

// meter counts the CPU time and peak memory of a run's processes.
type meter struct {
	pids  []int
	cpu0  time.Duration
	start string
}

func startMeter(pids []int) *meter {
	m := &meter{pids: pids, start: loadavg()}
	m.cpu0 = m.cpu()
	return m
}

// stop puts CPU per delivery (n of them) and the processes' peak resident
// memory together into res.
func (m *meter) stop(res *result, n int) {
	res.loadStart = m.start
	if n > 0 {
		res.cpuPerDelivery = (m.cpu() - m.cpu0) / time.Duration(n)
	}
	for _, pid := range m.pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
				res.peakMiB += float64(kb) / 1024
			}
		}
	}
}

// cpu is the user and system time of every process, from /proc (in clock
// ticks of 10ms, Linux's USER_HZ).
func (m *meter) cpu() time.Duration {
	var total time.Duration
	for _, pid := range m.pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// The command name, in parentheses, may hold spaces: count fields
		// after its closing parenthesis.
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 13 {
			continue
		}
		utime, _ := strconv.ParseInt(f[11], 10, 64)
		stime, _ := strconv.ParseInt(f[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}
