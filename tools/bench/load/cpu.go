package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of /proc CPU times (100 on every Linux
// platform Go supports).
const clockTick = 10 * time.Millisecond

// cpuUse is the CPU a run spent, split by who spent it. On this 2-core
// machine the database, the broker and the client compete for the same
// cores, so CPU per step, not wall time alone, says where a step's cost goes.
// And the machine may be shared, so a run must show when something else took
// CPU meanwhile.
type cpuUse struct {
	// machine is every core's busy time; client is the benchmark's own
	// process (worker or baseline plus the publisher), or pgbench; broker is
	// RabbitMQ; postgres is the benchmark database's backends and the
	// server's shared processes (WAL writer, checkpointer); foreign is every
	// other process, other databases' backends included.
	machine, client, broker, postgres, foreign time.Duration
}

// kernel is the kernel's work not charged to a process: network softirqs,
// block I/O, kernel threads.
func (u cpuUse) kernel() time.Duration {
	return u.machine - u.client - u.broker - u.postgres - u.foreign
}

type who int

const (
	foreign who = iota
	client      // this process or its pgbench: measured by the kernel's accounting of it
	kernel
	broker
	postgres
)

// cpuMeter measures a run's cpuUse. Processes come and go during a run (a
// test suite elsewhere, pgbench's backends), so it samples every process's
// CPU time until stopped and charges each one its last sample. Listing /proc
// costs far more than reading a process's stat, so it lists once a second and
// reads the processes it knows five times a second: one that exits loses at
// most its last 200 ms, one born and gone within a second is missed.
type cpuMeter struct {
	db          string
	self        int
	machine0    time.Duration
	self0       time.Duration
	first, last map[int]time.Duration
	kind        map[int]who
	// alive are the processes still to read, by their stat file.
	alive map[int]string
	stop  chan struct{}
	done  chan struct{}
}

// startCPU starts measuring; db names the benchmark's database, whose
// backends are PostgreSQL's share of the run.
func startCPU(db string) *cpuMeter {
	m := &cpuMeter{db: db, self: os.Getpid(), first: map[int]time.Duration{}, last: map[int]time.Duration{},
		kind: map[int]who{}, alive: map[int]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	m.machine0, m.self0 = machineCPU(), selfCPU()
	m.list()
	m.sample()
	for pid, t := range m.last {
		m.first[pid] = t
	}
	go func() {
		defer close(m.done)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for n := 1; ; n++ {
			select {
			case <-m.stop:
				return
			case <-tick.C:
				if n%5 == 0 {
					m.list()
				}
				m.sample()
			}
		}
	}()
	return m
}

// finish stops measuring and returns what the run spent.
func (m *cpuMeter) finish() cpuUse {
	close(m.stop)
	<-m.done
	m.list()
	m.sample()
	u := cpuUse{machine: machineCPU() - m.machine0, client: selfCPU() - m.self0}
	for pid, t := range m.last {
		d := t - m.first[pid] // a process born during the run started from zero
		switch m.kind[pid] {
		case broker:
			u.broker += d
		case postgres:
			u.postgres += d
		case foreign:
			u.foreign += d
		}
	}
	return u
}

// list finds the processes born since the last look and classifies them.
// Kernel threads and this process are not read again: the machine's total
// and this process's own accounting cover them.
func (m *cpuMeter) list() {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		pid, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(path, "/proc/"), "/stat"))
		if _, known := m.kind[pid]; known {
			continue
		}
		comm, f, ok := readStat(path)
		if !ok {
			continue
		}
		m.kind[pid] = m.classify(pid, comm, f[1])
		if k := m.kind[pid]; k != kernel && pid != m.self {
			m.alive[pid] = path
		}
	}
}

// sample records the CPU time so far of every process still alive.
func (m *cpuMeter) sample() {
	for pid, path := range m.alive {
		_, f, ok := readStat(path)
		if !ok {
			delete(m.alive, pid) // exited: its last sample stands
			continue
		}
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		m.last[pid] = time.Duration(u+s) * clockTick
	}
}

// readStat reads a /proc/<pid>/stat file: "pid (comm) state ppid ...", with
// utime and stime in fields 14 and 15; f starts at the state.
func readStat(path string) (comm string, f []string, ok bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", nil, false
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return "", nil, false
	}
	f = strings.Fields(string(b[end+1:]))
	return string(b[open+1 : end]), f, len(f) >= 13
}

func (m *cpuMeter) classify(pid int, comm, ppid string) who {
	switch {
	case pid == m.self || comm == "pgbench":
		return client
	case pid == 2 || ppid == "2":
		return kernel
	case comm == "beam.smp" || comm == "erl_child_setup" || comm == "epmd" || comm == "inet_gethost":
		return broker
	case comm != "postgres":
		return foreign
	}
	// A backend's title is "postgres: <cluster>: <user> <database> <host>(<port>) <activity>".
	title, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	f := strings.Fields(string(bytes.ReplaceAll(title, []byte{0}, []byte{' '})))
	if len(f) >= 5 && f[0] == "postgres:" && (strings.Contains(f[4], "(") || f[4] == "[local]") && f[3] != m.db {
		return foreign
	}
	return postgres
}

// machineCPU is every core's busy time so far.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	// cpu user nice system idle iowait irq softirq steal guest ...
	line, _, _ := bytes.Cut(b, []byte("\n"))
	var busy time.Duration
	for i, f := range strings.Fields(string(line)) {
		if i == 0 || i == 4 || i == 5 { // label, idle, iowait
			continue
		}
		if i > 8 { // guest time is already counted in user
			break
		}
		n, _ := strconv.ParseInt(f, 10, 64)
		busy += time.Duration(n) * clockTick
	}
	return busy
}

// selfCPU is this process's CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// waitQuiet waits up to limit for half a second in which other programs use
// less than a tenth of a core, so that a run starts on a machine at rest. It
// reports whether it found one.
func waitQuiet(ctx context.Context, db string, limit time.Duration) bool {
	deadline := time.Now().Add(limit)
	for {
		m := startCPU(db)
		select {
		case <-ctx.Done():
			m.finish()
			return false
		case <-time.After(500 * time.Millisecond):
		}
		if m.finish().foreign < 50*time.Millisecond {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}
