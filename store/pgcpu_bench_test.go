package store_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// postgresCPU is the CPU time every postgres process on this machine has
// spent (user and system), for benchmarks to report the database's share
// of an operation: on a 2-core machine that, not wall time, is what limits
// throughput.
func postgresCPU(b *testing.B) time.Duration {
	b.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		b.Fatal(err)
	}
	var ticks int64
	for _, p := range dirs {
		stat, err := os.ReadFile(p)
		if err != nil {
			continue // gone
		}
		open, close := bytes.IndexByte(stat, '('), bytes.LastIndexByte(stat, ')')
		if open < 0 || close < open || string(stat[open+1:close]) != "postgres" {
			continue
		}
		f := bytes.Fields(stat[close+2:])
		// utime and stime are fields 14 and 15 of stat, 12 and 13 after comm.
		u, _ := strconv.ParseInt(string(f[11]), 10, 64)
		s, _ := strconv.ParseInt(string(f[12]), 10, 64)
		ticks += u + s
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// reportPostgresCPU reports the database's CPU per op since began.
func reportPostgresCPU(b *testing.B, began time.Duration) {
	b.ReportMetric(float64((postgresCPU(b)-began).Microseconds())/float64(b.N), "pg-µs/op")
}
