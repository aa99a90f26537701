package harness

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/sys/unix"

	"lifeboat/bench"
)

// Report is the outcome of Run.
type Report struct {
	Machine       Machine           `json:"machine"`
	Shape         string            `json:"shape"` // the corpus shape: mix or binaries
	Scale         string            `json:"scale"`
	Seed          uint64            `json:"seed"`
	Churn         float64           `json:"churn"`
	Rounds        int               `json:"rounds"`
	Corpus        bench.TreeStats   `json:"corpus"`
	CorpusSeconds float64           `json:"corpus_seconds"` // time to generate it
	Tools         []Tool            `json:"tools"`
	Skipped       map[string]string `json:"skipped"` // peer -> why it did not run
	Results       []Result          `json:"results"`
	Medians       []Result          `json:"medians"` // per tool and scenario, each field the median over rounds
	Ratios        []Ratio           `json:"ratios"`  // Lifeboat against each peer, from the medians
	// Ceilings are what the save path's stages allowed on this corpus,
	// one per round: the mean of the measurements right before and
	// right after Lifeboat's first capture. Ceiling is their median,
	// stage by stage.
	Ceilings []Ceiling `json:"ceilings"`
	Ceiling  Ceiling   `json:"ceiling"`
	// TargetChecks are the performance targets checked on the medians.
	TargetChecks []Target `json:"targets"`
}

// Ratio compares Lifeboat's medians with a peer's in one scenario.
type Ratio struct {
	Peer     string `json:"peer"`
	Scenario string `json:"scenario"`
	// Speedup is the peer's time over Lifeboat's: above 1, Lifeboat is faster.
	Speedup float64 `json:"speedup"`
	// CPU is the peer's CPU time over Lifeboat's: above 1, Lifeboat uses less.
	CPU float64 `json:"cpu"`
	// RSS and Repo are Lifeboat's peak RSS and repository size over the
	// peer's: below 1, Lifeboat uses less.
	RSS  float64 `json:"rss"`
	Repo float64 `json:"repo"`
}

// Machine describes where the run happened, load included: other work on
// the machine skews absolute times, which is why tools are interleaved.
type Machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model"`
	MemoryMiB int64  `json:"memory_mib"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"` // of the harness
	LoadStart string `json:"load_start"` // /proc/loadavg when the run started
	LoadEnd   string `json:"load_end"`
}

func machineInfo() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAvg()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.MemoryMiB = int64(si.Totalram) * int64(si.Unit) >> 20
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// loadAvg is the first three fields of /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:min(3, len(f))], " ")
}

// median of xs (the mean of the middle two for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 1 {
		return s[n/2]
	} else {
		return (s[n/2-1] + s[n/2]) / 2
	}
}

// summarize fills Medians and Ratios from Results.
func (r *Report) summarize() {
	r.Medians, r.Ratios = nil, []Ratio{}
	for _, t := range r.Tools {
		for _, sc := range Reported {
			var rs []Result
			for _, x := range r.Results {
				if x.Tool == t.Name && x.Scenario == sc {
					rs = append(rs, x)
				}
			}
			if len(rs) > 0 {
				r.Medians = append(r.Medians, medianResult(rs))
			}
		}
	}
	for _, t := range r.Tools[min(1, len(r.Tools)):] {
		for _, sc := range Scenarios {
			lb, ok1 := r.Median("lifeboat", sc)
			p, ok2 := r.Median(t.Name, sc)
			if !ok1 || !ok2 {
				continue
			}
			r.Ratios = append(r.Ratios, Ratio{Peer: t.Name, Scenario: sc, Speedup: div(p.Seconds, lb.Seconds),
				CPU: div(p.CPU, lb.CPU), RSS: div(float64(lb.MaxRSS), float64(p.MaxRSS)), Repo: div(float64(lb.RepoBytes), float64(p.RepoBytes))})
		}
	}
	r.Ceiling = medianCeiling(r.Ceilings)
	r.TargetChecks = r.Targets()
}

// medianCeiling takes the median of each stage's time over cs (and of
// the bytes and counts, which differ only by the chunker's polynomial).
// A stage's times are compared as the wall time it needs on its round's
// cores (its CPU seconds over the round's Procs), so rounds run with
// different GOMAXPROCS agree when they allowed the same; stages are
// matched by name.
func medianCeiling(cs []Ceiling) Ceiling {
	if len(cs) == 0 {
		return Ceiling{}
	}
	pick := func(f func(Ceiling) float64) float64 { return medianOf(cs, f) }
	m := Ceiling{Procs: cs[0].Procs, Files: cs[0].Files}
	m.Bytes = int64(pick(func(c Ceiling) float64 { return float64(c.Bytes) }))
	m.Blobs = int(pick(func(c Ceiling) float64 { return float64(c.Blobs) }))
	var names []string
	for _, c := range cs {
		for _, st := range c.Stages {
			if !slices.Contains(names, st.Name) {
				names = append(names, st.Name)
			}
		}
	}
	for _, name := range names {
		var walls []float64
		for _, c := range cs {
			for _, st := range c.Stages {
				if st.Name == name && c.Procs > 0 {
					walls = append(walls, st.Seconds/float64(c.Procs))
				}
			}
		}
		m.Stages = append(m.Stages, StageTime{Name: name, Seconds: median(walls) * float64(m.Procs)})
	}
	m.total()
	return m
}

// medianOf is the median of f over xs.
func medianOf[T any](xs []T, f func(T) float64) float64 {
	vs := make([]float64, len(xs))
	for i, x := range xs {
		vs[i] = f(x)
	}
	return median(vs)
}

func div(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// Median returns the median result of tool in scenario.
func (r *Report) Median(tool, scenario string) (Result, bool) {
	for _, m := range r.Medians {
		if m.Tool == tool && m.Scenario == scenario {
			return m, true
		}
	}
	return Result{}, false
}

// medianResult takes the median of every measured field of rs (results
// of one tool and scenario): each field on its own.
func medianResult(rs []Result) Result {
	pick := func(f func(Result) float64) float64 { return medianOf(rs, f) }
	m := Result{Tool: rs[0].Tool, Scenario: rs[0].Scenario, Round: 0}
	m.Wall = pick(func(x Result) float64 { return x.Wall })
	m.User = pick(func(x Result) float64 { return x.User })
	m.Sys = pick(func(x Result) float64 { return x.Sys })
	m.CPU = pick(func(x Result) float64 { return x.CPU })
	m.Sync = pick(func(x Result) float64 { return x.Sync })
	m.Seconds = pick(func(x Result) float64 { return x.Seconds })
	m.MBps = pick(func(x Result) float64 { return x.MBps })
	m.FilesPerS = pick(func(x Result) float64 { return x.FilesPerS })
	m.MaxRSS = int64(pick(func(x Result) float64 { return float64(x.MaxRSS) }))
	m.RepoBytes = int64(pick(func(x Result) float64 { return float64(x.RepoBytes) }))
	m.Bytes = int64(pick(func(x Result) float64 { return float64(x.Bytes) }))
	m.Files = int(pick(func(x Result) float64 { return float64(x.Files) }))
	for _, x := range rs {
		m.Samples = append(m.Samples, x.Samples...)
	}
	if len(m.Samples) > 0 { // the median of all the steps, not of the rounds' medians
		m.Seconds = median(m.Samples)
		m.Wall = m.Seconds
	}
	return m
}

// WriteText prints the report for people: machine, corpus, tools and
// their configuration, the medians and the ratios.
func (r *Report) WriteText(w io.Writer) error {
	m := r.Machine
	fmt.Fprintf(w, "machine: %d CPUs (%s), %d MiB, Linux %s; load %s at start, %s at end\n", m.CPUs, m.CPUModel, m.MemoryMiB, m.Kernel, m.LoadStart, m.LoadEnd)
	fmt.Fprintf(w, "corpus: %s, scale %s, seed %d: %d files, %.1f MB (generated in %.1fs); churn %.1f%%; %d round(s), tools interleaved scenario by scenario, order rotated\n",
		r.Shape, r.Scale, r.Seed, r.Corpus.Files, float64(r.Corpus.Bytes)/1e6, r.CorpusSeconds, r.Churn*100, r.Rounds)
	for _, t := range r.Tools {
		fmt.Fprintf(w, "%s: %s (%s)\n  %s\n", t.Name, t.Version, t.Path, t.Config)
	}
	for _, name := range sortedKeys(r.Skipped) {
		fmt.Fprintf(w, "%s: skipped: %s\n", name, r.Skipped[name])
	}
	fmt.Fprintf(w, "\nmedians over %d round(s); restore time includes a syncfs after the tool exits\n", r.Rounds)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\ttool\tseconds\tCPU s (user+sys)\tMB/s\tfiles/s\tpeak RSS MiB\trepo MB\t")
	for _, sc := range Reported {
		for _, t := range r.Tools {
			x, ok := r.Median(t.Name, sc)
			if !ok {
				continue
			}
			files := "-"
			if x.Files > 0 {
				files = fmt.Sprintf("%.0f", x.FilesPerS)
			}
			fmt.Fprintf(tw, "%s\t%s\t%.2f\t%.2f (%.2f+%.2f)\t%.1f\t%s\t%.0f\t%.1f\t\n", sc, t.Name, x.Seconds, x.CPU, x.User, x.Sys,
				x.MBps, files, float64(x.MaxRSS)/(1<<20), float64(x.RepoBytes)/1e6)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := r.writeServe(w); err != nil {
		return err
	}
	if len(r.Ratios) > 0 {
		fmt.Fprintf(w, "\nLifeboat against each peer: speed-up = peer time / Lifeboat time, CPU = peer CPU / Lifeboat CPU;\nRSS and repo = Lifeboat / peer (below 1: Lifeboat uses less)\n")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "scenario\tpeer\tspeed-up\tCPU\tRSS\trepo\t")
		for _, x := range r.Ratios {
			fmt.Fprintf(tw, "%s\t%s\t%.2fx\t%.2fx\t%.2f\t%.3f\t\n", x.Scenario, x.Peer, x.Speedup, x.CPU, x.RSS, x.Repo)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if err := r.writeCeiling(w); err != nil {
		return err
	}
	return r.writeTargets(w)
}

// writeServe prints the serve scenario's captures round by round, if it
// ran (its CPU is the server's, in clock ticks of 10 ms).
func (r *Report) writeServe(w io.Writer) error {
	for _, x := range r.Results {
		what := map[string]string{ScenarioServeUnchanged: "captures", ScenarioServeRound: "periodic rounds"}[x.Scenario]
		if what == "" {
			continue
		}
		parts := make([]string, len(x.Samples))
		for i, s := range x.Samples {
			parts[i] = fmt.Sprintf("%.3f", s)
		}
		if _, err := fmt.Fprintf(w, "round %d: %s, %d %s by lifeboat serve (seconds, from its receipts): %s; median %.3f s, CPU %.2f s\n",
			x.Round, x.Scenario, len(x.Samples), what, strings.Join(parts, " "), x.Seconds, x.CPU); err != nil {
			return err
		}
	}
	return nil
}

// writeCeiling prints the stage ceiling, if it was measured.
func (r *Report) writeCeiling(w io.Writer) error {
	c := r.Ceiling
	if len(c.Stages) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nthe save path's stages on this corpus, one worker per core (%d), median of %d: %d files, %.1f MB, %d distinct chunks\n",
		c.Procs, len(r.Ceilings), c.Files, float64(c.Bytes)/1e6, c.Blobs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\tCPU s\tMB/s alone on all cores\t")
	for _, st := range c.Stages {
		fmt.Fprintf(tw, "%s\t%.2f\t%.0f\t\n", st.Name, st.Seconds, st.MBps)
	}
	fmt.Fprintf(tw, "all stages together\t%.2f\t%.0f\t\n", c.Seconds*float64(c.Procs), c.MBps)
	if err := tw.Flush(); err != nil {
		return err
	}
	if lb, ok := r.Median("lifeboat", ScenarioFirst); ok {
		if _, err := fmt.Fprintf(w, "first capture: %.1f MB/s, %.0f%% of what the stages allow together (%.0f MB/s), medians of the rounds; the slowest stage alone (%s) allows %.0f MB/s\n",
			lb.MBps, 100*div(lb.MBps, c.MBps), c.MBps, c.Slowest().Name, c.Slowest().MBps); err != nil {
			return err
		}
	}
	for _, rc := range r.Ceilings {
		line := fmt.Sprintf("round %d: the stages together %.0f MB/s", rc.Round, rc.MBps)
		if len(rc.Measured) == 2 {
			line += fmt.Sprintf(" (%.0f before the capture, %.0f after; their times averaged)", rc.Measured[0], rc.Measured[1])
		}
		if res, ok := r.firstCapture(rc.Round); ok {
			line += fmt.Sprintf(", first capture %.1f MB/s (%.0f%%)", res.MBps, 100*div(res.MBps, rc.MBps))
		}
		if _, err := fmt.Fprintln(w, line); err != nil {
			return err
		}
	}
	if shares := r.CeilingShares(); len(shares) > 0 {
		_, err := fmt.Fprintf(w, "the target takes the median of the rounds' shares: %.0f%%\n", 100*median(shares))
		return err
	}
	return nil
}

func sortedKeys(m map[string]string) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
