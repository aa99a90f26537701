package harness

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"

	"lifeboat/crypt"
)

// Scenario names, in the order each round runs them.
const (
	ScenarioFirst     = "first-capture"
	ScenarioUnchanged = "unchanged-capture"
	ScenarioChurn     = "churn-capture"
	ScenarioRestore   = "restore"
	ScenarioPrune     = "prune"
)

// Scenarios lists the scenarios every tool runs, in order.
var Scenarios = []string{ScenarioFirst, ScenarioUnchanged, ScenarioChurn, ScenarioRestore, ScenarioPrune}

// Reported lists every scenario a report holds, in order: Scenarios, and
// Lifeboat's serve scenarios right after the unchanged re-capture they
// repeat.
var Reported = []string{ScenarioFirst, ScenarioUnchanged, ScenarioServeUnchanged, ScenarioServeRound, ScenarioChurn, ScenarioRestore, ScenarioPrune}

// Peers are the tools --compare accepts.
var Peers = []string{"restic", "borg"}

// Tool describes one tool of a run: what ran and how it was configured.
type Tool struct {
	Name    string `json:"name"`
	Path    string `json:"path"`
	Version string `json:"version"`
	Config  string `json:"config"`
}

// site is where one tool works in one round.
type site struct {
	round             int
	work              string // the tool's copy of the corpus: workN/corpus, paths of one length for every tool
	repo, cache, base string
	target            string // restore target
	password          string
	lastCapture       string // borg: the archive to extract
	// profiles are the CPU and memory profile files of the measured
	// Lifeboat command of the current scenario ("" for none).
	profiles []string
}

// driver knows one tool's command lines.
type driver interface {
	tool() Tool
	// init makes a fresh repository (not measured).
	init(s *site) command
	// step is the measured command of a scenario; before lists commands
	// run first, unmeasured (forget before prune). Every scenario but
	// restore and prune is a capture, the scenario's name naming it
	// where the tool names captures (borg archives): the capture
	// scenarios and the prune history's "history-N".
	step(s *site, scenario string) (before []command, c command)
	// restored is where the restore put the captured tree.
	restored(s *site) string
}

// lifeboatDriver runs the Lifeboat CLI with its defaults.
type lifeboatDriver struct{ path, version string }

func newLifeboat(path string) (*lifeboatDriver, error) {
	if path == "" {
		return nil, fmt.Errorf("no lifeboat binary given")
	}
	abs, err := exec.LookPath(path)
	if err != nil {
		return nil, fmt.Errorf("lifeboat binary %s: %w", path, err)
	}
	return &lifeboatDriver{path: abs, version: binaryVersion(abs)}, nil
}

// binaryVersion reads the Go build info of a binary: module version,
// commit and whether the tree was modified.
func binaryVersion(path string) string {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	v := []string{bi.Main.Version, bi.GoVersion}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			v = append(v, "commit "+s.Value)
		case "vcs.modified":
			if s.Value == "true" {
				v = append(v, "modified")
			}
		}
	}
	return strings.Join(v, " ")
}

func (d *lifeboatDriver) tool() Tool {
	return Tool{Name: "lifeboat", Path: d.path, Version: d.version,
		Config: fmt.Sprintf("defaults: argon2id %d MiB key, zstd fastest, 16 MiB packs; restore --profiles; prune --instant-delete --max-unused 0%%", crypt.DefaultKDFMemoryKiB>>10)}
}

// cmd is a lifeboat command line; measured ones write the scenario's
// profiles.
func (d *lifeboatDriver) cmd(s *site, measured bool, args ...string) command {
	full := []string{"--repo", s.repo, "--cache-dir", s.cache}
	for i, flag := range []string{"--cpuprofile", "--memprofile"} {
		if measured && i < len(s.profiles) && s.profiles[i] != "" {
			full = append(full, flag, s.profiles[i])
		}
	}
	return command{path: d.path, args: append(full, args...), env: []string{"LIFEBOAT_PASSWORD=" + s.password}}
}

// profileFile names the profile of one scenario and round: cpu.out gives
// cpu.first-capture.r1.out.
func profileFile(base, scenario string, round int) string {
	ext := filepath.Ext(base)
	return fmt.Sprintf("%s.%s.r%d%s", strings.TrimSuffix(base, ext), scenario, round, ext)
}

func (d *lifeboatDriver) init(s *site) command { return d.cmd(s, false, "init") }

func (d *lifeboatDriver) step(s *site, scenario string) ([]command, command) {
	switch scenario {
	case ScenarioRestore:
		return nil, d.cmd(s, true, "restore", "--workspace", "w", "--profiles", "--target", s.target, "latest")
	case ScenarioPrune:
		return []command{d.cmd(s, false, "forget", "--keep-last", "1")}, d.cmd(s, true, "prune", "--instant-delete", "--max-unused", "0%")
	}
	return nil, d.cmd(s, true, "capture", "--workspace", "w", s.work)
}

func (d *lifeboatDriver) restored(s *site) string { return s.target }

// resticDriver runs restic with its defaults (compression auto).
type resticDriver struct{ path, version string }

func (d *resticDriver) tool() Tool {
	return Tool{Name: "restic", Path: d.path, Version: d.version,
		Config: "defaults: compression auto, scrypt key; backup with a local cache (--cache-dir); prune --max-unused 0"}
}

func (d *resticDriver) cmd(s *site, args ...string) command {
	return command{path: d.path, args: append([]string{"-r", s.repo, "--cache-dir", s.cache}, args...),
		env: []string{"RESTIC_PASSWORD=" + s.password}}
}

func (d *resticDriver) init(s *site) command { return d.cmd(s, "init") }

func (d *resticDriver) step(s *site, scenario string) ([]command, command) {
	switch scenario {
	case ScenarioRestore:
		return nil, d.cmd(s, "restore", "latest", "--target", s.target)
	case ScenarioPrune:
		return []command{d.cmd(s, "forget", "--keep-last", "1")}, d.cmd(s, "prune", "--max-unused", "0")
	}
	return nil, d.cmd(s, "backup", s.work)
}

func (d *resticDriver) restored(s *site) string { return filepath.Join(s.target, s.work) }

// borgDriver runs borg 1.2 as people configure it: repokey-blake2 and
// zstd level 3.
type borgDriver struct{ path, version string }

func (d *borgDriver) tool() Tool {
	return Tool{Name: "borg", Path: d.path, Version: d.version,
		Config: "init -e repokey-blake2, create --compression zstd,3, files cache in BORG_BASE_DIR; prune --keep-last 1 then compact --threshold 0"}
}

func (d *borgDriver) cmd(s *site, args ...string) command {
	return command{path: d.path, args: args, env: []string{"BORG_PASSPHRASE=" + s.password, "BORG_BASE_DIR=" + s.base,
		"BORG_RELOCATED_REPO_ACCESS_IS_OK=yes", "BORG_UNKNOWN_UNENCRYPTED_REPO_ACCESS_IS_OK=yes"}}
}

func (d *borgDriver) init(s *site) command { return d.cmd(s, "init", "-e", "repokey-blake2", s.repo) }

func (d *borgDriver) step(s *site, scenario string) ([]command, command) {
	switch scenario {
	case ScenarioRestore:
		c := d.cmd(s, "extract", s.repo+"::"+s.lastCapture)
		c.dir = s.target
		return nil, c
	case ScenarioPrune:
		return []command{d.cmd(s, "prune", "--keep-last", "1", s.repo)}, d.cmd(s, "compact", "--threshold", "0", s.repo)
	}
	s.lastCapture = scenario
	return nil, d.cmd(s, "create", "--compression", "zstd,3", s.repo+"::"+scenario, s.work)
}

func (d *borgDriver) restored(s *site) string { return filepath.Join(s.target, s.work) }

// newPeer finds a peer's binary on PATH and asks it for its version; a
// missing binary gives the reason it is skipped.
func newPeer(ctx context.Context, name string) (driver, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return nil, fmt.Errorf("%s is not installed (not found on PATH): %w", name, err)
	}
	arg := "version"
	if name == "borg" {
		arg = "--version"
	}
	out, err := exec.CommandContext(ctx, path, arg).Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", path, arg, err)
	}
	v := strings.TrimSpace(string(out))
	switch name {
	case "restic":
		return &resticDriver{path, v}, nil
	case "borg":
		return &borgDriver{path, v}, nil
	}
	return nil, fmt.Errorf("unknown tool %q: --compare takes %s", name, strings.Join(Peers, ","))
}
