package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"lifeboat/bench/harness"
)

type options struct {
	out, errw                     io.Writer
	json                          bool
	corpus, scale, dir, svg       string
	lifeboat                      string
	cpuProfile, memProfile        string
	compare                       []string
	rounds, verifyRounds, history int
	serveCaptures                 int
	churn                         float64
	seed                          uint64
	keep                          bool
}

type stepMessage struct {
	MessageType string `json:"message_type"` // "bench_step"
	harness.Result
}

type reportMessage struct {
	MessageType string `json:"message_type"` // "bench"
	*harness.Report
}

func newCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lifeboat-bench [--corpus mix|binaries] [--scale small|medium|full] [--compare restic,borg] [--rounds N] [--lifeboat PATH]",
		Short: "Measure capture, re-capture, churn, restore and prune throughput, side by side with restic and borg",
		Long: "Generate a seeded workspace corpus, then, for a lifeboat binary and each tool named by --compare, in rounds with the " +
			"order rotated: first capture, unchanged re-capture, capture after churn, full restore (verified), prune after forgetting " +
			"old snapshots. Every tool runs as a child process, measured the same way (wall, user and system CPU, peak RSS from " +
			"wait4). In each round, right before and right after Lifeboat's first capture, this process measures what the save " +
			"path's stages allow on the corpus (the stage ceiling). Prints medians, Lifeboat's ratios to each peer, the stage " +
			"ceiling and the performance targets (met or MISSED). See docs/performance.md.",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageError{fmt.Sprintf("unexpected argument %q: lifeboat-bench takes only flags", args[0])}
			}
			return nil
		},
		SilenceErrors: true,
		SilenceUsage:  true,
		RunE:          func(cmd *cobra.Command, _ []string) error { return runBench(cmd, o) },
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	f := cmd.Flags()
	f.StringVar(&o.corpus, "corpus", "mix", "corpus shape: mix (source trees, dependencies, databases, a browser profile, blobs) or binaries (shared libraries, a browser build, data, docs, a Go module cache)")
	f.StringVar(&o.scale, "scale", "full", "corpus size: small (seconds), medium or full (mix: about 100,000 files, 800 MB; binaries: about 71,000 files, 2.2 GB)")
	f.StringSliceVar(&o.compare, "compare", nil, "also run these tools: restic, borg (comma-separated; a tool not installed is skipped with the reason)")
	f.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every scenario for every tool in turn, the order rotated")
	f.Float64Var(&o.churn, "churn", 0.05, "fraction of the corpus the churn step changes")
	f.Uint64Var(&o.seed, "seed", 1, "corpus seed: the same seed gives the same corpus")
	f.StringVar(&o.dir, "dir", "", "empty work directory, removed after unless --keep (default: a new temporary directory)")
	f.BoolVar(&o.keep, "keep", false, "keep the work directory (corpus and the tools' logs)")
	f.StringVar(&o.svg, "svg", "", "write a chart of throughput and peak memory by scenario and tool to this SVG `FILE`")
	f.StringVar(&o.lifeboat, "lifeboat", "", "lifeboat binary to measure (default: the lifeboat beside this binary, else lifeboat on PATH)")
	f.IntVar(&o.history, "prune-history", 0, "before the prune scenario, each tool makes N more captures, each after a churn (unmeasured), so prune works on a longer history")
	f.IntVar(&o.serveCaptures, "serve-captures", harness.ServeCaptures, "unchanged captures lifeboat serve makes through its API in each round, and periodic rounds after them, measured from its receipts (0: skip both serve scenarios)")
	f.IntVar(&o.verifyRounds, "verify-rounds", 1, "check each restore of the first N rounds file by file against the captured tree")
	f.StringVar(&o.cpuProfile, "cpuprofile", "", "every measured Lifeboat step writes a CPU profile, named after this `FILE` with its scenario and round")
	f.StringVar(&o.memProfile, "memprofile", "", "every measured Lifeboat step writes a heap profile, named after this `FILE` with its scenario and round")
	f.BoolVar(&o.json, "json", false, "print JSON lines (docs/json.md)")
	return cmd
}

// defaultLifeboat is the lifeboat binary beside this one (as
// `go build -o bin/ ./cmd/lifeboat ./cmd/lifeboat-bench` leaves them), or
// else the name lifeboat, which the harness looks up on PATH.
func defaultLifeboat() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "lifeboat")
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			return p
		}
	}
	return "lifeboat"
}

func runBench(cmd *cobra.Command, o *options) error {
	if !slices.Contains(harness.Corpora, o.corpus) {
		return usageError{fmt.Sprintf("--corpus: unknown corpus %q: use one of %s", o.corpus, strings.Join(harness.Corpora, ", "))}
	}
	if _, err := harness.ScaleNamed(o.scale); err != nil {
		return usageError{"--scale: " + err.Error()}
	}
	if o.lifeboat == "" {
		o.lifeboat = defaultLifeboat()
	}
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "lifeboat-bench-")
		if err != nil {
			return err
		}
		dir = d
	}
	if !o.keep {
		defer os.RemoveAll(dir)
	}
	var compare []string
	for _, c := range o.compare {
		if c = strings.TrimSpace(c); c != "" {
			compare = append(compare, c)
		}
	}
	rep, err := harness.Run(cmd.Context(), harness.Options{Dir: dir, Corpus: o.corpus, ScaleName: o.scale, Seed: o.seed, Churn: o.churn, Rounds: o.rounds,
		Lifeboat: o.lifeboat, Compare: compare, CPUProfile: o.cpuProfile, MemProfile: o.memProfile, VerifyRounds: o.verifyRounds, PruneHistory: o.history,
		ServeCaptures: serveCaptures(o.serveCaptures),
		Progress: func(r harness.Result) {
			o.emit(stepMessage{"bench_step", r}, func(io.Writer) {
				o.note("round %d %-8s %-23s %7.2fs  cpu %6.2fs  %7.1f MB/s  rss %4d MiB", r.Round, r.Tool, r.Scenario, r.Seconds, r.CPU, r.MBps, r.MaxRSS>>20)
			})
		}})
	if err != nil {
		return err
	}
	if o.svg != "" {
		if err := writeChart(o.svg, rep); err != nil {
			return err
		}
	}
	if o.keep {
		o.note("kept %s", dir)
	}
	o.emit(reportMessage{"bench", rep}, func(w io.Writer) { _ = rep.WriteText(w) })
	return nil
}

// serveCaptures maps --serve-captures to harness.Options.ServeCaptures,
// where 0 is the default and a negative number skips the scenario.
func serveCaptures(n int) int {
	if n <= 0 {
		return -1
	}
	return n
}

func writeChart(path string, rep *harness.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	if err := harness.WriteSVG(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("--svg %s: %w", path, err)
	}
	return f.Close()
}
