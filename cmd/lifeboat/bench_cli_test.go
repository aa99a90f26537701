package main

import (
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/bench"
)

// `lifeboat bench` end to end at the small scale: one round against
// restic and borg (each skipped with its reason when not installed),
// JSON lines, the SVG chart, and a CPU and memory profile of every
// Lifeboat scenario (none of the harness itself).
func TestBenchCommand(t *testing.T) {
	bin := lifeboatBinary(t)
	e := newEnv(t)
	dir, prof, svg := filepath.Join(e.dir, "bench"), filepath.Join(e.dir, "prof"), filepath.Join(e.dir, "chart.svg")
	r := e.ok("bench", "--scale", "small", "--rounds", "1", "--compare", "restic,borg", "--json", "--svg", svg, "--lifeboat", bin,
		"--dir", dir, "--cpuprofile", filepath.Join(prof, "cpu.out"), "--memprofile", filepath.Join(prof, "mem.out"))
	lines := jsonLines(t, r.stdout)
	last := lines[len(lines)-1]
	if last["message_type"] != "bench" {
		t.Fatalf("last message %v", last["message_type"])
	}
	tools := len(last["tools"].([]any))
	skipped := last["skipped"].(map[string]any)
	if tools+len(skipped) != 3 {
		t.Fatalf("tools %v, skipped %v", last["tools"], skipped)
	}
	for name, why := range skipped {
		t.Logf("%s skipped: %v", name, why)
	}
	if steps := len(lines) - 1; steps != tools*len(bench.Scenarios) {
		t.Fatalf("%d bench_step lines, want %d", steps, tools*len(bench.Scenarios))
	}
	for _, l := range lines[:len(lines)-1] {
		if l["message_type"] != "bench_step" || l["wall_seconds"].(float64) <= 0 || l["max_rss_bytes"].(float64) <= 0 {
			t.Fatalf("step %v", l)
		}
	}
	if n := len(last["ratios"].([]any)); n != (tools-1)*len(bench.Scenarios) {
		t.Fatalf("%d ratios", n)
	}
	for _, sc := range bench.Scenarios {
		for _, kind := range []string{"cpu", "mem"} {
			p := filepath.Join(prof, kind+"."+sc+".r1.out")
			if fi, err := os.Stat(p); err != nil || fi.Size() == 0 {
				t.Errorf("profile %s: %v", p, err)
			}
		}
	}
	for _, p := range []string{"cpu.out", "mem.out"} {
		if _, err := os.Stat(filepath.Join(prof, p)); !os.IsNotExist(err) {
			t.Errorf("the harness profiled itself into %s: %v", p, err)
		}
	}
	b, err := os.ReadFile(svg)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil || !strings.Contains(string(b), ">prune<") {
		t.Fatalf("chart: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("work directory kept without --keep: %v", err)
	}
}

func TestBenchUsageErrors(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{
		{"bench", "--scale", "huge"},
		{"bench", "--scale", "small", "--compare", "kopia", "--lifeboat", "/bin/true"},
		{"bench", "--scale", "small", "--churn", "0", "--lifeboat", "/bin/true"},
		{"bench", "--scale", "small", "--rounds", "0", "--lifeboat", "/bin/true"},
	} {
		if r := e.run(args...); r.code != exitUsage || !strings.Contains(r.stderr, "lifeboat: ") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
