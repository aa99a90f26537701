package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"lifeboat/bench"
)

type benchOptions struct {
	scale, dir, svg, lifeboat string
	compare                   []string
	rounds, verifyRounds      int
	churn                     float64
	seed                      uint64
	keep                      bool
}

type benchStepMessage struct {
	MessageType string `json:"message_type"` // "bench_step"
	bench.Result
}

type benchReportMessage struct {
	MessageType string `json:"message_type"` // "bench"
	*bench.Report
}

func newBenchCommand(g *globalOptions) *cobra.Command {
	o := benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench [--scale small|medium|full] [--compare restic,borg] [--rounds N]",
		Short: "Measure capture, re-capture, churn, restore and prune throughput, side by side with restic and borg",
		Long: "Generate a seeded workspace corpus, then, for Lifeboat and each tool named by --compare, in rounds with the order " +
			"rotated: first capture, unchanged re-capture, capture after churn, full restore (verified), prune after forgetting " +
			"old snapshots. Every tool runs as a child process, measured the same way (wall, user and system CPU, peak RSS from " +
			"wait4). In each round, right before and right after Lifeboat's first capture, this process measures what the save " +
			"path's stages allow on the corpus (the stage ceiling). Prints medians, Lifeboat's ratios to each peer, the stage " +
			"ceiling and the performance targets (met or MISSED). " +
			"--cpuprofile and --memprofile are passed to every measured " +
			"Lifeboat child, one file per scenario and round. See docs/performance.md.",
		Args: cobra.NoArgs,
		// The global profile flags are for the children here: do not
		// profile the harness.
		PersistentPreRunE:  func(*cobra.Command, []string) error { g.out.json = g.json; return nil },
		PersistentPostRunE: func(*cobra.Command, []string) error { return nil },
		RunE:               func(cmd *cobra.Command, _ []string) error { return runBench(cmd, g, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.scale, "scale", "full", "corpus size: small (seconds), medium or full (about 100,000 files, 800 MB)")
	f.StringSliceVar(&o.compare, "compare", nil, "also run these tools: restic, borg (comma-separated; a tool not installed is skipped with the reason)")
	f.IntVar(&o.rounds, "rounds", 3, "rounds; each runs every scenario for every tool in turn, the order rotated")
	f.Float64Var(&o.churn, "churn", 0.05, "fraction of the corpus the churn step changes")
	f.Uint64Var(&o.seed, "seed", 1, "corpus seed: the same seed gives the same corpus")
	f.StringVar(&o.dir, "dir", "", "empty work directory, removed after unless --keep (default: a new temporary directory)")
	f.BoolVar(&o.keep, "keep", false, "keep the work directory (corpus and the tools' logs)")
	f.StringVar(&o.svg, "svg", "", "write a chart of throughput and peak memory by scenario and tool to this SVG `FILE`")
	f.StringVar(&o.lifeboat, "lifeboat", "", "lifeboat binary to measure (default: this one)")
	f.IntVar(&o.verifyRounds, "verify-rounds", 1, "check each restore of the first N rounds file by file against the captured tree")
	return cmd
}

func runBench(cmd *cobra.Command, g *globalOptions, o benchOptions) error {
	if _, err := bench.ScaleNamed(o.scale); err != nil {
		return usageError{"--scale: " + err.Error()}
	}
	if o.lifeboat == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find this lifeboat binary (give --lifeboat): %w", err)
		}
		o.lifeboat = exe
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
	rep, err := bench.Run(cmd.Context(), bench.Options{Dir: dir, ScaleName: o.scale, Seed: o.seed, Churn: o.churn, Rounds: o.rounds,
		Lifeboat: o.lifeboat, Compare: compare, CPUProfile: g.prof.cpuPath, MemProfile: g.prof.memPath, VerifyRounds: o.verifyRounds,
		Progress: func(r bench.Result) {
			g.out.emit(benchStepMessage{"bench_step", r}, func(io.Writer) {
				g.out.note("round %d %-8s %-17s %7.2fs  cpu %6.2fs  %7.1f MB/s  rss %4d MiB", r.Round, r.Tool, r.Scenario, r.Seconds, r.CPU, r.MBps, r.MaxRSS>>20)
			})
		}})
	if err != nil {
		if errors.Is(err, bench.ErrOption) {
			return usageError{err.Error()}
		}
		return err
	}
	if o.svg != "" {
		if err := writeChart(o.svg, rep); err != nil {
			return err
		}
	}
	if o.keep {
		g.out.note("kept %s", dir)
	}
	g.out.emit(benchReportMessage{"bench", rep}, func(w io.Writer) { _ = rep.WriteText(w) })
	return nil
}

func writeChart(path string, rep *bench.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--svg: %w", err)
	}
	if err := bench.WriteSVG(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("--svg %s: %w", path, err)
	}
	return f.Close()
}
