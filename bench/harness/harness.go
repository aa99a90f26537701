package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"lifeboat/bench"
	"lifeboat/profile/fixture"
)

// Options configure Run.
type Options struct {
	Dir       string  // work directory: made if missing, must be empty
	ScaleName string  // a key of Scales (and of BinariesScales)
	Corpus    string  // the corpus shape, one of Corpora ("": mix)
	Seed      uint64  // corpus seed
	Churn     float64 // fraction the churn step changes (0.05 for 5%)
	Rounds    int     // rounds; each runs every scenario for every tool in turn, order rotated
	Lifeboat  string  // the lifeboat binary to measure
	// Trampoline is a binary that calls harness.Trampoline first thing
	// (lifeboat-bench does); default: this process's executable.
	Trampoline string
	Compare    []string
	// CPUProfile and MemProfile, when set, are base names of profiles
	// that every measured Lifeboat child writes (see profileFile).
	CPUProfile, MemProfile string
	// PruneHistory is how many more captures each tool makes right
	// before the prune scenario, each after a churn of its copy of the
	// corpus (unmeasured): prune then works on a longer history, as after
	// days of checkpoints, with more packs to delete and repack.
	PruneHistory int
	// VerifyRounds is how many rounds check each restore against the
	// captured tree, file by file (the first ones).
	VerifyRounds int
	// ServeCaptures is how many unchanged captures the serve scenario
	// (ScenarioServeUnchanged) measures per round; 0 means ServeCaptures,
	// and a negative number skips the scenario.
	ServeCaptures int
	// Progress, if set, sees each result as it is measured.
	Progress func(Result)
}

// ErrOption marks errors in Options (wrapped with the detail).
var ErrOption = errors.New("bench option")

// Result is one measured step: one scenario of one tool in one round.
type Result struct {
	Round    int    `json:"round"`
	Tool     string `json:"tool"`
	Scenario string `json:"scenario"`
	Usage
	CPU float64 `json:"cpu_seconds"`
	// Sync is the time to flush the file system after a restore (what
	// the tool left unwritten); Seconds is Wall plus Sync, the time
	// throughput and ratios use.
	Sync      float64  `json:"sync_seconds"`
	Seconds   float64  `json:"seconds"`
	Bytes     int64    `json:"bytes"` // the workspace's bytes (prune: the repository's before it)
	Files     int      `json:"files"` // the workspace's files (prune: 0)
	MBps      float64  `json:"mb_per_s"`
	FilesPerS float64  `json:"files_per_s"`
	RepoBytes int64    `json:"repo_bytes"` // repository size after the step
	Profiles  []string `json:"profiles,omitempty"`
	// Samples are the times of the steps a result is the median of: the
	// serve scenarios' captures and rounds (ScenarioServeUnchanged,
	// ScenarioServeRound); absent otherwise.
	Samples []float64 `json:"samples,omitempty"`
}

// Run generates the corpus once and runs every scenario for Lifeboat and
// the peers in o.Compare, o.Rounds times (runRound): each scenario for
// every tool before the next scenario, the tools' order rotated each
// round. Peers that are not installed are skipped, with the
// reason in the report.
func Run(ctx context.Context, o Options) (*Report, error) {
	if o.Corpus == "" {
		o.Corpus = "mix"
	}
	corp, err := corpusNamed(o.Corpus, o.ScaleName, o.Seed)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOption, err)
	}
	if !(o.Churn > 0 && o.Churn <= 1) {
		return nil, fmt.Errorf("%w: churn %v: want a fraction more than 0 and at most 1 (0.05 is 5%%)", ErrOption, o.Churn)
	}
	if o.Rounds < 1 {
		return nil, fmt.Errorf("%w: rounds %d: want at least 1", ErrOption, o.Rounds)
	}
	if o.PruneHistory < 0 {
		return nil, fmt.Errorf("%w: prune history %d: want 0 or more captures", ErrOption, o.PruneHistory)
	}
	lb, err := newLifeboat(o.Lifeboat)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrOption, err)
	}
	if o.Trampoline == "" {
		if o.Trampoline, err = os.Executable(); err != nil {
			return nil, err
		}
	}
	rep := &Report{Shape: o.Corpus, Scale: o.ScaleName, Seed: o.Seed, Churn: o.Churn, Rounds: o.Rounds, Skipped: map[string]string{}}
	drivers := []driver{lb}
	for _, name := range o.Compare {
		if !slices.Contains(Peers, name) {
			return nil, fmt.Errorf("%w: unknown tool %q to compare with: use %s", ErrOption, name, strings.Join(Peers, ","))
		}
		d, err := newPeer(ctx, name)
		if err != nil {
			rep.Skipped[name] = err.Error()
			continue
		}
		drivers = append(drivers, d)
	}
	for _, d := range drivers {
		rep.Tools = append(rep.Tools, d.tool())
	}
	dir, err := prepareDir(o.Dir)
	if err != nil {
		return nil, err
	}
	for _, p := range []string{o.CPUProfile, o.MemProfile} {
		if p != "" {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return nil, fmt.Errorf("profile directory: %w", err)
			}
		}
	}
	rep.Machine = machineInfo()
	pristine := filepath.Join(dir, "corpus")
	start := time.Now()
	if err := corp.generate(pristine, o.Seed); err != nil {
		return nil, fmt.Errorf("generate the corpus: %w", err)
	}
	if rep.Corpus, err = bench.Stat(pristine); err != nil {
		return nil, err
	}
	rep.CorpusSeconds = time.Since(start).Seconds()
	defer removeLeftovers(dir)
	for r := 1; r <= o.Rounds; r++ {
		res, ceiling, err := runRound(ctx, o, drivers, dir, pristine, corp, r)
		if err != nil {
			return nil, err
		}
		rep.Results = append(rep.Results, res...)
		if ceiling != nil {
			rep.Ceilings = append(rep.Ceilings, *ceiling)
		}
	}
	rep.Machine.LoadEnd = loadAvg()
	rep.summarize()
	return rep, nil
}

// prepareDir makes dir absolute and checks it is empty (peers store
// absolute paths, and the harness deletes what it makes there).
func prepareDir(dir string) (string, error) {
	if dir == "" {
		return "", fmt.Errorf("no work directory given")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(abs, 0o700); err != nil {
		return "", err
	}
	ents, err := os.ReadDir(abs)
	if err != nil {
		return "", err
	}
	if len(ents) > 0 {
		return "", fmt.Errorf("%w: work directory %s is not empty: give an empty or new directory", ErrOption, abs)
	}
	return abs, nil
}

// toolRound is one tool in one round.
type toolRound struct {
	o    Options
	d    driver
	name string
	dir  string // the run's work directory
	s    *site
	logs string
	// ceiling is the stage ceiling measured around Lifeboat's first
	// capture (bracketCeiling): the machine's speed drifts by a fifth and
	// more within minutes, so a ceiling measured at the start of the
	// round, a minute or two from the capture, said as much about that
	// drift as about the capture. nil for the peers.
	ceiling *Ceiling
	// corp is the corpus: its churn, and its browser profile, which
	// Lifeboat's restores are checked against.
	corp corpus
}

// removeLeftovers removes what the tool rounds left in dir: their homes
// (repository, cache, restored tree) and corpus copies. Nothing is
// deleted before the last round ends: on ext4 without a journal (the
// project's VMs) a file created within minutes of many deletions in the
// same block group costs a scan past every recently deleted inode, so a
// tool restoring right after the previous tool's tree was removed took up
// to 5x the system time (30 s instead of 4 s for 100,000 files; perf:
// recently_deleted under ext4_create), whichever tool it was.
func removeLeftovers(dir string) {
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		var round int
		var tool string
		if _, err := fmt.Sscanf(e.Name(), "r%d-%s", &round, &tool); e.Name() == "trash" || err == nil {
			_ = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
}

// runRound runs one round: a fresh repository and a fresh copy of the
// pristine corpus for each tool, then each scenario for every tool in
// turn, the tools in drivers' order rotated by the round. Scenario by
// scenario, not tool by tool: this VM's speed drifts by a fifth and more
// within minutes. Tool by tool, all of one tool's scenarios ran between
// two tools' steps of the same scenario, a minute or more; now only the
// other tools' steps of that scenario do. Each tool's corpus copy and
// home are left for removeLeftovers (the copies moved out of the way
// under trash/). It also returns the round's stage ceiling, measured
// around Lifeboat's first capture.
func runRound(ctx context.Context, o Options, drivers []driver, dir, pristine string, corp corpus, round int) ([]Result, *Ceiling, error) {
	k := (round - 1) % len(drivers)
	var tools []*toolRound
	defer func() {
		for _, t := range tools {
			t.discardWork()
		}
	}()
	for i := range drivers {
		// Each driver has its own copy, at a path of the same length
		// for all (peers store absolute paths): work1, work2, ...
		j := (k + i) % len(drivers)
		d := drivers[j]
		t, err := newToolRound(ctx, o, d, dir, pristine, corp, round, filepath.Join(dir, fmt.Sprintf("work%d", j+1), "corpus"))
		tools = append(tools, t) // discarded by the deferred loop, on an error too
		if err != nil {
			return nil, nil, fmt.Errorf("round %d, %s: %w", round, d.tool().Name, err)
		}
	}
	var out []Result
	for _, sc := range Scenarios {
		for _, t := range tools {
			if sc == ScenarioChurn {
				if _, err := corp.churn(t.s.work, o.Seed+1, o.Churn); err != nil {
					return nil, nil, fmt.Errorf("round %d, %s: churn: %w", round, t.name, err)
				}
			}
			if sc == ScenarioPrune {
				if err := t.history(ctx, o.PruneHistory); err != nil {
					return nil, nil, fmt.Errorf("round %d, %s: %w", round, t.name, err)
				}
			}
			res, err := t.scenario(ctx, sc)
			if err != nil {
				return nil, nil, fmt.Errorf("round %d, %s: %w", round, t.name, err)
			}
			if o.Progress != nil {
				o.Progress(res)
			}
			out = append(out, res)
		}
		if sc != ScenarioUnchanged || o.ServeCaptures < 0 {
			continue
		}
		// Right after the CLI's unchanged re-capture, on the same
		// unchanged copy: the same re-capture driven by `lifeboat serve`.
		for _, t := range tools {
			if _, ok := t.d.(*lifeboatDriver); !ok {
				continue
			}
			res, err := t.serveUnchanged(ctx, cmp.Or(o.ServeCaptures, ServeCaptures))
			if err != nil {
				return nil, nil, fmt.Errorf("round %d, %s: %s: %w", round, t.name, ScenarioServeUnchanged, err)
			}
			for _, r := range res {
				if o.Progress != nil {
					o.Progress(r)
				}
				out = append(out, r)
			}
		}
	}
	var ceiling *Ceiling
	for _, t := range tools {
		if t.ceiling != nil {
			ceiling = t.ceiling
		}
	}
	return out, ceiling, nil
}

// newToolRound makes one tool's round ready: a fresh home (repository
// and caches) and a fresh copy of the pristine corpus at work, then the
// repository initialised. It returns the toolRound even with an error,
// for what it made of the copy to be discarded.
func newToolRound(ctx context.Context, o Options, d driver, dir, pristine string, corp corpus, round int, work string) (*toolRound, error) {
	name := d.tool().Name
	home := filepath.Join(dir, fmt.Sprintf("r%d-%s", round, name))
	t := &toolRound{o: o, d: d, name: name, dir: dir, logs: filepath.Join(dir, "logs"), corp: corp,
		s: &site{round: round, work: work, repo: filepath.Join(home, "repo"),
			cache: filepath.Join(home, "cache"), base: filepath.Join(home, "base"), target: filepath.Join(home, "restore"),
			password: "lifeboat-bench-password"}}
	for _, p := range []string{filepath.Dir(work), home} {
		if err := os.RemoveAll(p); err != nil {
			return t, err
		}
	}
	for _, p := range []string{filepath.Dir(work), home, t.logs} {
		if err := os.MkdirAll(p, 0o700); err != nil {
			return t, err
		}
	}
	if err := bench.CopyTree(pristine, work); err != nil {
		return t, fmt.Errorf("copy the corpus: %w", err)
	}
	if _, err := syncFS(dir); err != nil {
		return t, err
	}
	if _, err := measure(ctx, o.Trampoline, d.init(t.s), t.log("init")); err != nil {
		return t, err
	}
	return t, nil
}

// discardWork moves the tool's corpus copy under trash/, for
// removeLeftovers to delete when the last round has ended.
func (t *toolRound) discardWork() {
	trash := filepath.Join(t.dir, "trash")
	if os.MkdirAll(trash, 0o700) == nil {
		_ = os.Rename(filepath.Dir(t.s.work), filepath.Join(trash, fmt.Sprintf("work-r%d-%s", t.s.round, t.name)))
	}
}

func (t *toolRound) log(step string) string {
	return filepath.Join(t.logs, fmt.Sprintf("r%d.%s.%s.log", t.s.round, t.name, step))
}

// history makes n more captures, unmeasured, each after a churn of the
// tool's copy of the corpus (the same churns for every tool).
func (t *toolRound) history(ctx context.Context, n int) error {
	t.s.profiles = nil // not measured: no profiles
	for i := range n {
		if _, err := t.corp.churn(t.s.work, t.o.Seed+2+uint64(i), t.o.Churn); err != nil {
			return fmt.Errorf("churn before history capture %d: %w", i+1, err)
		}
		name := fmt.Sprintf("history-%d", i+1)
		_, c := t.d.step(t.s, name)
		if _, err := measure(ctx, t.o.Trampoline, c, t.log(name)); err != nil {
			return err
		}
	}
	return nil
}

// scenario measures one scenario: its unmeasured commands first, then a
// flushed file system and a warm page cache, then the measured command;
// after a restore, the sync and the verification.
func (t *toolRound) scenario(ctx context.Context, sc string) (Result, error) {
	s, o := t.s, t.o
	res := Result{Round: s.round, Tool: t.name, Scenario: sc}
	tree, err := bench.Stat(s.work)
	if err != nil {
		return res, err
	}
	res.Bytes, res.Files = tree.Bytes, tree.Files
	// Everything a step may read is in the page cache: the workspace,
	// the repository and the tool's own caches. Run scenario by scenario
	// (runRound), a tool's repository and caches were last touched a
	// minute or more before its next step, and this VM pages out what
	// has not been touched for 60 s.
	warmed := []string{s.work, s.repo, s.cache, s.base}
	if sc == ScenarioPrune {
		res.Files = 0
		if res.Bytes, err = duBytes(s.repo); err != nil {
			return res, err
		}
	}
	s.profiles = []string{"", ""}
	if t.name == "lifeboat" {
		for i, base := range []string{o.CPUProfile, o.MemProfile} {
			if base != "" {
				s.profiles[i] = profileFile(base, sc, s.round)
				res.Profiles = append(res.Profiles, s.profiles[i])
			}
		}
	}
	before, c := t.d.step(s, sc)
	for i, b := range before {
		if _, err := measure(ctx, o.Trampoline, b, t.log(fmt.Sprintf("%s-before%d", sc, i))); err != nil {
			return res, err
		}
	}
	if _, err := syncFS(t.dir); err != nil {
		return res, err
	}
	for _, dir := range warmed {
		if err := warm(dir); err != nil {
			return res, err
		}
	}
	bracket := t.name == "lifeboat" && sc == ScenarioFirst
	var pre Ceiling // measured before the capture
	if bracket {
		if pre, err = MeasureCeiling(ctx, s.work); err != nil {
			return res, fmt.Errorf("the stage ceiling before the first capture: %w", err)
		}
	}
	if res.Usage, err = measure(ctx, o.Trampoline, c, t.log(sc)); err != nil {
		return res, err
	}
	if bracket {
		post, err := MeasureCeiling(ctx, s.work)
		if err != nil {
			return res, fmt.Errorf("the stage ceiling after the first capture: %w", err)
		}
		ceiling := bracketCeiling(pre, post)
		ceiling.Round = s.round
		t.ceiling = &ceiling
	}
	if sc == ScenarioRestore {
		if res.Sync, err = syncFS(s.target); err != nil {
			return res, err
		}
		if s.round <= o.VerifyRounds {
			if err := verifyRestore(ctx, t.corp.profile, t.name, s.work, t.d.restored(s)); err != nil {
				return res, err
			}
		}
	}
	res.CPU = res.Usage.CPU()
	res.Seconds = res.Wall + res.Sync
	if res.Seconds > 0 {
		res.MBps = float64(res.Bytes) / 1e6 / res.Seconds
		res.FilesPerS = float64(res.Files) / res.Seconds
	}
	res.RepoBytes, err = duBytes(s.repo)
	return res, err
}

// verifyRestore compares a restored tree with the tree that was
// captured. Lifeboat restores browser profiles through its own path
// (caches and lock files left out, Preferences marked as a clean exit),
// so for it the profile is checked with the fixture's own checker.
func verifyRestore(ctx context.Context, fx *fixture.Fixture, tool, want, got string) error {
	var skip func(rel string) bool
	if tool == "lifeboat" {
		prof := filepath.FromSlash(bench.ProfileRel)
		skip = func(rel string) bool { return rel == prof || strings.HasPrefix(rel, prof+string(filepath.Separator)) }
		udd := filepath.Join(got, prof)
		if _, err := os.Stat(filepath.Join(want, prof)); err == nil {
			if err := fx.Check(ctx, udd, false); err != nil {
				return fmt.Errorf("restored browser profile %s: %w", udd, err)
			}
		}
	}
	d, err := bench.CompareSkip(want, got, skip)
	if err != nil {
		return fmt.Errorf("verify the restore: %w", err)
	}
	if len(d) > 0 {
		more := ""
		if len(d) > 10 {
			d, more = d[:10], fmt.Sprintf(" (and %d more)", len(d)-10)
		}
		return fmt.Errorf("the restored tree %s differs from the captured tree %s: %s%s", got, want, strings.Join(d, "; "), more)
	}
	return nil
}
