package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/kelseyhightower/envconfig"
)

func TestSoakRateIsRelaysASecondOrAShareOfTheMeasuredDrainRate(t *testing.T) {
	for _, tc := range []struct {
		env  string
		want float64 // offered at a measured drain rate of 5,000 relays/s
	}{
		{"", 3000}, // unset: the default
		{"3000", 3000},
		{"1234.5", 1234.5},
		{"40%", 2000},
		{" 150% ", 7500},
	} {
		t.Setenv("SOAK_RATE", tc.env)
		if tc.env == "" {
			os.Unsetenv("SOAK_RATE")
		}
		var c config
		if err := envconfig.Process("soak", &c); err != nil {
			t.Fatalf("SOAK_RATE=%q: %v", tc.env, err)
		}
		if got := c.Rate.perSecond(5000); got != tc.want {
			t.Errorf("SOAK_RATE=%q offers %v relays/s, want %v", tc.env, got, tc.want)
		}
	}
	for _, bad := range []string{"fast", "0", "-40%", "%", "40%%", "Inf"} {
		var r rate
		if err := r.Decode(bad); err == nil || !strings.Contains(err.Error(), "SOAK_RATE") {
			t.Errorf("SOAK_RATE=%q: %v, want an error naming SOAK_RATE", bad, err)
		}
	}
}

func TestTheReportGivesTheOfferedRateAsAShareOfTheMeasuredDrainRate(t *testing.T) {
	r := soakOf(5, func(int) time.Duration { return 20 * time.Millisecond }, func(int) int64 { return 50 << 20 }, func(int) float64 { return 40 << 20 })
	r.config.Rate, r.config.CapacityRelays = rate{value: 0.4, share: true}, 30000
	r.rate, r.capacity = 2000, 5000
	var b bytes.Buffer
	if _, err := r.writeMarkdown(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Soak: 2000 relays/s", "**40% of the drain rate**", "30000 relays at 5000 relays/s", "SOAK_RATE=40%"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, b.String())
		}
	}
}
