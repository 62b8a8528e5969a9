package main

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
)

// The p99 of the lane waits of a second is the upper bound of the bucket
// it falls in, over what the cumulative histogram gained in that second
// alone.
func TestBucketQuantileIsOverWhatTheSecondAdded(t *testing.T) {
	inf := math.Inf(1)
	before := []bucket{{0.001, 100}, {0.01, 100}, {0.1, 100}, {inf, 100}}
	// 100 more waits: 98 under 1 ms, 2 between 10 and 100 ms.
	after := []bucket{{0.001, 198}, {0.01, 198}, {0.1, 200}, {inf, 200}}
	if got := bucketQuantile(before, after, 0.99); got != 0.1 {
		t.Errorf("p99 = %v, want 0.1 (the two slow waits are the top 2%%)", got)
	}
	if got := bucketQuantile(before, after, 0.5); got != 0.001 {
		t.Errorf("p50 = %v, want 0.001", got)
	}
	if got := bucketQuantile(after, after, 0.99); got != 0 {
		t.Errorf("p99 of a second without waits = %v, want 0", got)
	}
	past := []bucket{{0.001, 200}, {0.01, 200}, {0.1, 200}, {inf, 210}}
	if got := bucketQuantile(after, past, 0.99); got != 0.1 {
		t.Errorf("p99 past the last bound = %v, want the largest finite bound", got)
	}
}

// Seconds are written in order once the inbox has been read past them and
// their counters were read, each with its latency figures and wait events;
// the final flush writes what is left.
func TestSecondsAreWrittenInOrderOnceComplete(t *testing.T) {
	var out bytes.Buffer
	t0 := time.Unix(1_700_000_000, 0)
	r := &recorder{w: &out, began: t0, seconds: map[int64]*second{}}
	for i := range 100 {
		r.latency(t0.Add(time.Second+time.Duration(i)*time.Millisecond), time.Duration(i+1)*time.Millisecond)
	}
	r.latency(t0.Add(200*time.Millisecond), 5*time.Millisecond)
	s := r.at(t0.Add(time.Second))
	s.Waits["IO:WALSync"] += 3
	r.at(t0.Add(3 * time.Second)) // a sample of a later second
	r.counted = t0.Add(time.Second).Unix()

	if err := r.flush(t0.Add(5*time.Second), false); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("wrote %d seconds, want 2 (the third's counters are not read yet):\n%s", len(lines), out.String())
	}
	var first, second second
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if first.Elapsed != 0 || first.Commits != 1 || second.Elapsed != 1 || second.Commits != 100 {
		t.Errorf("seconds = %+v, %+v; want elapsed 0 with 1 commit, then elapsed 1 with 100", first, second)
	}
	if second.P99 < 99 || second.P99 > 100 || second.Max != 100 || second.Waits["IO:WALSync"] != 3 {
		t.Errorf("second 1 = %+v, want p99 ≈ 99 ms, max 100 ms and 3 WALSync samples", second)
	}
	r.latency(t0.Add(time.Second), time.Hour) // read late: its second stands as written
	if err := r.flush(t0.Add(10*time.Second), true); err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(out.String()), "\n"); len(lines) != 3 || len(r.all) != 3 {
		t.Fatalf("after the final flush %d lines (%d kept), want 3", len(lines), len(r.all))
	}
	if worst := worstSeconds(r.all, 1); len(worst) != 1 || worst[0].Elapsed != 1 {
		t.Errorf("worst second = %+v, want elapsed 1", worst)
	}
}
