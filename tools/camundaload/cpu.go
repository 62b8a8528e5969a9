package main

import (
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTick is USER_HZ, the unit of /proc CPU times.
const clockTick = 10 * time.Millisecond

// cpuUse is CPU time spent over a wall time, by who spent it.
type cpuUse struct {
	wall, worker, postgres, client, machine time.Duration
}

// cores is d as cores busy over the wall time.
func (u cpuUse) cores(d time.Duration) float64 {
	if u.wall <= 0 {
		return 0
	}
	return d.Seconds() / u.wall.Seconds()
}

// cpuMeter reads the CPU time of the worker, of the client and of the
// benchmark database's backends (found in pg_stat_activity at each sample,
// each charged from its first sample), and the machine's.
type cpuMeter struct {
	db                  *pgxpool.Pool
	workerPID, nodePID  int
	first, last, prev   cpuUse
	backends            map[int][2]time.Duration // first and last seen
	firstTime, lastTime time.Time
	prevTime            time.Time
	sampled             bool
}

func newCPU(db *pgxpool.Pool, workerPID, nodePID int) *cpuMeter {
	return &cpuMeter{db: db, workerPID: workerPID, nodePID: nodePID, backends: map[int][2]time.Duration{}}
}

func (m *cpuMeter) sample(ctx context.Context) error {
	rows, err := m.db.Query(ctx, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()")
	if err != nil {
		return err
	}
	var pids []int
	for rows.Next() {
		var pid int
		if err := rows.Scan(&pid); err != nil {
			return err
		}
		pids = append(pids, pid)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	now := time.Now()
	for _, pid := range pids {
		t, ok := procCPU(pid)
		if !ok {
			continue
		}
		b, seen := m.backends[pid]
		if !seen {
			b[0] = t
		}
		b[1] = t
		m.backends[pid] = b
	}
	var pg time.Duration
	for _, b := range m.backends {
		pg += b[1] - b[0]
	}
	w, _ := procCPU(m.workerPID)
	c, _ := procCPU(m.nodePID)
	u := cpuUse{worker: w, client: c, postgres: pg, machine: machineCPU()}
	m.prev, m.prevTime = m.last, m.lastTime
	m.last, m.lastTime = u, now
	if !m.sampled {
		m.first, m.firstTime, m.prev, m.prevTime, m.sampled = u, now, u, now, true
	}
	return nil
}

func diff(a, b cpuUse, wall time.Duration) cpuUse {
	return cpuUse{wall: wall, worker: a.worker - b.worker, postgres: a.postgres - b.postgres,
		client: a.client - b.client, machine: a.machine - b.machine}
}

// interval is the CPU spent between the last two samples.
func (m *cpuMeter) interval() cpuUse { return diff(m.last, m.prev, m.lastTime.Sub(m.prevTime)) }

// total is the CPU spent between the first and the last sample.
func (m *cpuMeter) total() cpuUse { return diff(m.last, m.first, m.lastTime.Sub(m.firstTime)) }

// procCPU is a process's user and system time so far.
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces: fields count from after its ')'.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * clockTick, true
}

// machineCPU is every core's busy time so far.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var busy int64
	for i, v := range f[1:] {
		n, _ := strconv.ParseInt(v, 10, 64)
		if i != 3 && i != 4 { // idle and iowait
			busy += n
		}
	}
	return time.Duration(busy) * clockTick
}

// loadAverage is the machine's 1-minute load average, as text.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}
