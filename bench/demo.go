package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"lifeboat/backend/local"
	"lifeboat/crypt"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

// Step is one stage of the demo, reported as it finishes.
type Step struct {
	Name     string        `json:"step"`
	Detail   string        `json:"detail"`
	Duration time.Duration `json:"-"`
	Seconds  float64       `json:"seconds"`
	MBps     float64       `json:"mb_per_s,omitempty"`
}

// Demo shows the whole job in dir (which it fills): it makes a repository
// and a sample workspace, captures it, changes it, captures again, deletes
// the workspace, restores the latest snapshot and verifies it file by file
// against a copy of what was captured. report is called after each step.
func Demo(ctx context.Context, dir string, report func(Step)) error {
	password := []byte("lifeboat demo password")
	repoDir, ws, ref, cache := filepath.Join(dir, "repo"), filepath.Join(dir, "workspace"), filepath.Join(dir, "expected"), filepath.Join(dir, "cache")
	step := func(name, detail string, start time.Time, bytes uint64) {
		d := time.Since(start)
		s := Step{Name: name, Detail: detail, Duration: d, Seconds: d.Seconds()}
		if bytes > 0 && d > 0 {
			s.MBps = float64(bytes) / 1e6 / d.Seconds()
		}
		report(s)
	}

	start := time.Now()
	be, err := local.Create(repoDir)
	if err != nil {
		return err
	}
	defer be.Close()
	if _, err := repo.Init(ctx, be, password, repo.InitOptions{KDF: crypt.NewKDFParams(1, 8*1024, 1)}); err != nil {
		return err
	}
	r, err := repo.Open(ctx, be, password, repo.Options{CacheDir: cache})
	if err != nil {
		return err
	}
	defer r.Close(ctx)
	step("init", "encrypted repository at "+repoDir, start, 0)

	start = time.Now()
	if err := Generate(ws, 1, SmallScale); err != nil {
		return err
	}
	step("workspace", fmt.Sprintf("sample workspace at %s (source tree, dependencies, a model file, a log)", ws), start, 0)

	capture := func(name string) (*snapshot.Manifest, error) {
		start := time.Now()
		parent, _ := snapshot.Find(ctx, r, "latest", "demo")
		m, err := snapshot.Capture(ctx, r, ws, snapshot.CaptureOptions{Workspace: "demo", Parent: parent, Cache: r.Index()})
		if err != nil {
			return nil, err
		}
		step(name, fmt.Sprintf("snapshot %s: %d files, %.1f MB, %.1f MB new", m.ID.Short(), m.Totals.Files,
			float64(m.Totals.Bytes)/1e6, float64(m.Totals.NewBytes)/1e6), start, m.Totals.Bytes)
		return m, nil
	}
	if _, err := capture("capture"); err != nil {
		return err
	}
	start = time.Now()
	n, err := Churn(ws, 2)
	if err != nil {
		return err
	}
	step("change", fmt.Sprintf("the agent changed %d paths", n), start, 0)
	m, err := capture("capture again")
	if err != nil {
		return err
	}
	if err := CopyTree(ws, ref); err != nil { // what the check compares against
		return err
	}

	start = time.Now()
	if err := os.RemoveAll(ws); err != nil {
		return err
	}
	step("lose", "the workspace is gone", start, 0)

	start = time.Now()
	latest, err := snapshot.Find(ctx, r, "latest", "demo")
	if err != nil {
		return err
	}
	if latest.ID != m.ID {
		return fmt.Errorf("latest snapshot is %s, want %s", latest.ID.Short(), m.ID.Short())
	}
	res, err := snapshot.Restore(ctx, r, latest, snapshot.RestoreOptions{Target: ws})
	if err != nil {
		return err
	}
	step("restore", fmt.Sprintf("restored %d files through staging into %s", res.Files, ws), start, res.Bytes)

	start = time.Now()
	diffs, err := Compare(ref, ws)
	if err != nil {
		return err
	}
	if len(diffs) > 0 {
		return fmt.Errorf("restored workspace differs from what was captured: %v", diffs)
	}
	step("verify", "every file, mode, time and link matches what was captured", start, 0)
	return nil
}
