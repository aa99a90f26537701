package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkFleet measures a fleet's first round of periodic captures:
// 10,000 small workspaces (LIFEBOAT_FLEET_WORKSPACES) registered on one
// S3 repository (versitygw, behind a counting proxy) and one PostgreSQL,
// captured by 1, 2 and 4 `lifeboat serve` processes (LIFEBOAT_FLEET_SERVERS,
// comma-separated). Each count gets a new bucket and database; the
// workspaces are registered with periodic captures off, then the servers
// start again with a short periodic interval, so every workspace is due
// at once. It reports captures per second (captured receipts over the
// time from the first capture's start to the last one's end), p50 and p99
// capture latency, S3 requests per capture, and the largest peak RSS of
// a server. Run it as a benchmark, once:
//
//	go test -run '^$' -bench BenchmarkFleet -benchtime 1x -timeout 2h ./cmd/lifeboat
func BenchmarkFleet(b *testing.B) {
	n := fleetWorkspaces(b, 10000)
	counts := []int{1, 2, 4}
	if v := os.Getenv("LIFEBOAT_FLEET_SERVERS"); v != "" {
		counts = nil
		for _, s := range strings.Split(v, ",") {
			c, err := strconv.Atoi(s)
			if err != nil || c < 1 {
				b.Fatalf("LIFEBOAT_FLEET_SERVERS=%q: want numbers of at least 1", v)
			}
			counts = append(counts, c)
		}
	}
	for _, servers := range counts {
		b.Run(fmt.Sprintf("servers=%d", servers), func(b *testing.B) {
			for range b.N {
				benchFleetRound(b, n, servers)
			}
		})
	}
}

func benchFleetRound(b *testing.B, n, servers int) {
	ctx, cancel := context.WithTimeout(b.Context(), 90*time.Minute)
	defer cancel()
	f := newFleet(b, true)
	registering := `
[lifecycle]
periodic_interval = "off"
`
	round := `
[lifecycle]
periodic_interval = "20s"
check_interval = "10m"
max_parallel = 4

[retention]
keep_last = 2
every = "10s"
`
	var ss []*fleetServer
	for i := range servers {
		ss = append(ss, f.addServer(string(rune('a'+i)), registering))
	}
	registering0 := time.Now()
	ids := f.addWorkspaces(ctx, n, ss...)
	b.Logf("%d servers: %d workspaces registered in %s", servers, n, time.Since(registering0).Round(time.Second))
	for _, s := range ss {
		s.stop()
		f.rewriteConfig(s, round)
	}
	before := len(f.proxy.Log())
	from := f.events.len()
	b.ResetTimer()
	for _, s := range ss {
		s.start()
	}
	f.waitCaptured(ctx, ids, from, time.Time{})
	b.StopTimer()
	requests := len(f.proxy.Log()) - before
	var rss int64
	for _, s := range ss {
		rss = max(rss, s.rss())
	}
	var captured []fleetEvent
	for _, ev := range f.events.snapshot()[from:] {
		if ev.typ == "receipt" && ev.Outcome == "captured" {
			captured = append(captured, ev)
		}
	}
	first, last := captured[0].Started, captured[0].Finished
	for _, ev := range captured {
		first, last = minTime(first, ev.Started), maxTime(last, ev.Finished)
	}
	lat := latencies(captured)
	slices.Sort(lat)
	b.ReportMetric(float64(len(captured))/last.Sub(first).Seconds(), "captures/s")
	b.ReportMetric(lat[len(lat)/2].Seconds()*1000, "p50-ms")
	b.ReportMetric(lat[len(lat)*99/100].Seconds()*1000, "p99-ms")
	b.ReportMetric(float64(requests)/float64(len(captured)), "s3-requests/capture")
	b.ReportMetric(float64(rss)/(1<<20), "max-server-RSS-MiB")
	b.Logf("%d servers: S3 requests since the registration: %s", servers, f.requestSummaryFrom(before))
	for _, s := range ss {
		s.stop()
	}
}

// rewriteConfig replaces the [lifecycle] table of s's config.
func (f *fleet) rewriteConfig(s *fleetServer, lifecycle string) {
	f.t.Helper()
	data, err := os.ReadFile(s.cfg)
	f.check(err)
	text, _, ok := strings.Cut(string(data), "\n[lifecycle]")
	if !ok {
		f.t.Fatalf("%s has no [lifecycle] table", s.cfg)
	}
	f.check(os.WriteFile(s.cfg, []byte(text+lifecycle), 0o600))
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
