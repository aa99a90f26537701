package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/bench/harness"
	"lifeboat/internal/jsonlines/jsonlinestest"
	"lifeboat/internal/proctest"
)

// TestMain lets this test binary be the harness's trampoline: run
// in-process, the command measures its children through it.
func TestMain(m *testing.M) {
	harness.Trampoline()
	os.Exit(m.Run())
}

type result struct {
	code           int
	stdout, stderr string
}

// runBenchCommand runs lifeboat-bench in-process.
func runBenchCommand(args ...string) result {
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return result{code, out.String(), errb.String()}
}

// jsonLines decodes --json output.
var jsonLines = jsonlinestest.Parse

// lifeboat-bench end to end at the small scale: one round against
// restic and borg (each skipped with its reason when not installed),
// JSON lines, the SVG chart, and a CPU and memory profile of every
// Lifeboat scenario (none of the harness itself).
func TestBenchCommand(t *testing.T) {
	bin := proctest.BuildLifeboat(t)
	tmp := t.TempDir()
	dir, prof, svg := filepath.Join(tmp, "bench"), filepath.Join(tmp, "prof"), filepath.Join(tmp, "chart.svg")
	r := runBenchCommand("--scale", "small", "--rounds", "1", "--compare", "restic,borg", "--json", "--svg", svg, "--lifeboat", bin,
		"--dir", dir, "--cpuprofile", filepath.Join(prof, "cpu.out"), "--memprofile", filepath.Join(prof, "mem.out"), "--serve-captures", "2")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
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
	if steps := len(lines) - 1; steps != tools*len(harness.Scenarios)+2 {
		t.Fatalf("%d bench_step lines, want %d", steps, tools*len(harness.Scenarios)+2)
	}
	served := 0
	for _, l := range lines[:len(lines)-1] {
		if l["scenario"] == harness.ScenarioServeUnchanged || l["scenario"] == harness.ScenarioServeRound {
			served++
			if samples, _ := l["samples"].([]any); l["tool"] != "lifeboat" || len(samples) != 2 {
				t.Fatalf("serve step %v", l)
			}
		}
		if l["message_type"] != "bench_step" || l["wall_seconds"].(float64) <= 0 || l["max_rss_bytes"].(float64) <= 0 {
			t.Fatalf("step %v", l)
		}
	}
	if served != 2 {
		t.Fatalf("%d serve steps, want a capture step and a periodic round step", served)
	}
	if p := filepath.Join(prof, "cpu."+harness.ScenarioServeUnchanged+".r1.out"); !fileHasData(p) {
		t.Errorf("profile %s missing or empty", p)
	}
	if n := len(last["ratios"].([]any)); n != (tools-1)*len(harness.Scenarios) {
		t.Fatalf("%d ratios", n)
	}
	for _, sc := range harness.Scenarios {
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

// Every scenario on the large-binary corpus at the small scale, beside
// restic (skipped with its reason when not installed), each restore
// verified file by file.
func TestBenchCommandBinaries(t *testing.T) {
	bin := proctest.BuildLifeboat(t)
	r := runBenchCommand("--corpus", "binaries", "--scale", "small", "--rounds", "1", "--compare", "restic", "--json",
		"--lifeboat", bin, "--dir", filepath.Join(t.TempDir(), "bench"), "--serve-captures", "0")
	if r.code != exitOK {
		t.Fatalf("exit %d\nstderr: %s", r.code, r.stderr)
	}
	lines := jsonLines(t, r.stdout)
	last := lines[len(lines)-1]
	tools := len(last["tools"].([]any))
	if last["shape"] != "binaries" || tools+len(last["skipped"].(map[string]any)) != 2 {
		t.Fatalf("report: shape %v, tools %v, skipped %v", last["shape"], last["tools"], last["skipped"])
	}
	want := harness.BinariesScales["small"]
	if files := last["corpus"].(map[string]any)["files"].(float64); int(files) < want.Libs+want.BrowserFiles+want.Docs+want.ModFiles {
		t.Fatalf("corpus of %v files", files)
	}
	if steps := len(lines) - 1; steps != tools*len(harness.Scenarios) {
		t.Fatalf("%d bench_step lines, want %d", steps, tools*len(harness.Scenarios))
	}
}

func fileHasData(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Size() > 0
}

func TestBenchUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"--scale", "huge"},
		{"--corpus", "videos", "--scale", "small", "--lifeboat", "/bin/true"},
		{"--corpus", "binaries", "--scale", "huge", "--lifeboat", "/bin/true"},
		{"--scale", "small", "--compare", "kopia", "--lifeboat", "/bin/true"},
		{"--scale", "small", "--churn", "0", "--lifeboat", "/bin/true"},
		{"--scale", "small", "--rounds", "0", "--lifeboat", "/bin/true"},
		{"--scale", "small", "--lifeboat", filepath.Join(t.TempDir(), "no-such-lifeboat")},
		{"--no-such-flag"},
		{"extra-argument"},
	} {
		if r := runBenchCommand(args...); r.code != exitUsage || !strings.Contains(r.stderr, "lifeboat-bench: ") {
			t.Errorf("%v: exit %d, stderr %q", args, r.code, r.stderr)
		}
	}
}
