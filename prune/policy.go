package prune

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"lifeboat/blob"
)

// Snapshot is what a retention policy looks at.
type Snapshot struct {
	ID        blob.ID
	Workspace string
	Time      time.Time
	Complete  bool
	Tags      []string
}

// Policy says which snapshots of a workspace to keep. A snapshot is kept
// when any rule keeps it. Periods (hourly ... monthly) are calendar
// periods in UTC: the newest snapshot of each of the N newest periods that
// have a snapshot is kept. Within is measured back from now.
type Policy struct {
	Last    int           `json:"keep_last,omitempty"`
	Within  time.Duration `json:"keep_within,omitempty"` // nanoseconds in JSON
	Hourly  int           `json:"keep_hourly,omitempty"`
	Daily   int           `json:"keep_daily,omitempty"`
	Weekly  int           `json:"keep_weekly,omitempty"`
	Monthly int           `json:"keep_monthly,omitempty"`
	Tags    []string      `json:"keep_tags,omitempty"`
}

// Empty reports whether the policy has no rule (it keeps nothing).
func (p Policy) Empty() bool {
	return p.Last <= 0 && p.Within <= 0 && p.Hourly <= 0 && p.Daily <= 0 && p.Weekly <= 0 && p.Monthly <= 0 && len(p.Tags) == 0
}

// Validate refuses negative counts and durations.
func (p Policy) Validate() error {
	for _, n := range []int{p.Last, p.Hourly, p.Daily, p.Weekly, p.Monthly} {
		if n < 0 {
			return fmt.Errorf("invalid policy: negative count %d", n)
		}
	}
	if p.Within < 0 {
		return fmt.Errorf("invalid policy: negative duration %s", p.Within)
	}
	return nil
}

func (p Policy) String() string {
	s := ""
	add := func(name string, n int) {
		if n > 0 {
			s += fmt.Sprintf(" %s %d", name, n)
		}
	}
	add("last", p.Last)
	if p.Within > 0 {
		s += " within " + p.Within.String()
	}
	add("hourly", p.Hourly)
	add("daily", p.Daily)
	add("weekly", p.Weekly)
	add("monthly", p.Monthly)
	for _, t := range p.Tags {
		s += " tag " + t
	}
	if s == "" {
		return "keep nothing"
	}
	return "keep" + s
}

// RuleLastGoodRoot is the reason given for a workspace's last good root.
const RuleLastGoodRoot = "last good root"

// Decision is the verdict on one snapshot.
type Decision struct {
	Snapshot Snapshot
	Keep     bool
	Reasons  []string // the rules that kept it; empty when it is removed
}

// Result is a policy applied to the snapshots of one workspace.
type Result struct {
	Workspace string
	Decisions []Decision // newest first
	Warnings  []string
}

// Apply decides, for the snapshots of one workspace, which to keep under p.
// The newest complete snapshot is always kept (RuleLastGoodRoot); when p
// alone would keep nothing, or the workspace has no complete snapshot, a
// warning says so.
func Apply(p Policy, ws string, snaps []Snapshot, now time.Time) Result {
	s := slices.Clone(snaps)
	slices.SortFunc(s, func(a, b Snapshot) int {
		if c := b.Time.Compare(a.Time); c != 0 {
			return c
		}
		return cmp.Compare(b.ID.String(), a.ID.String())
	})
	res := Result{Workspace: ws, Decisions: make([]Decision, len(s))}
	for i := range s {
		res.Decisions[i].Snapshot = s[i]
	}
	keep := func(i int, reason string) {
		res.Decisions[i].Keep = true
		res.Decisions[i].Reasons = append(res.Decisions[i].Reasons, reason)
	}
	for i := 0; i < len(s) && i < p.Last; i++ {
		keep(i, fmt.Sprintf("last %d", p.Last))
	}
	if p.Within > 0 {
		for i := range s {
			if !s[i].Time.Before(now.Add(-p.Within)) {
				keep(i, "within "+p.Within.String())
			}
		}
	}
	for _, b := range []struct {
		name   string
		n      int
		period func(time.Time) string
	}{
		{"hourly", p.Hourly, func(t time.Time) string { return t.Format("2006-01-02 15h") }},
		{"daily", p.Daily, func(t time.Time) string { return t.Format("2006-01-02") }},
		{"weekly", p.Weekly, func(t time.Time) string { y, w := t.ISOWeek(); return fmt.Sprintf("%d-W%02d", y, w) }},
		{"monthly", p.Monthly, func(t time.Time) string { return t.Format("2006-01") }},
	} {
		last, used := "", 0
		for i := range s {
			if used >= b.n {
				break
			}
			if per := b.period(s[i].Time.UTC()); per != last {
				keep(i, b.name+" "+per)
				last = per
				used++
			}
		}
	}
	for i := range s {
		for _, t := range p.Tags {
			if slices.Contains(s[i].Tags, t) {
				keep(i, "tag "+t)
			}
		}
	}
	policyKeeps := false
	for _, d := range res.Decisions {
		policyKeeps = policyKeeps || d.Keep
	}
	good := slices.IndexFunc(s, func(x Snapshot) bool { return x.Complete })
	if good >= 0 {
		keep(good, RuleLastGoodRoot)
	}
	switch {
	case len(s) > 0 && good < 0:
		res.Warnings = append(res.Warnings, fmt.Sprintf("workspace %q has no complete snapshot, so no last good root to protect", ws))
	case len(s) > 0 && !policyKeeps:
		res.Warnings = append(res.Warnings, fmt.Sprintf("the policy (%s) keeps no snapshot of workspace %q; keeping only its last good root %s",
			p, ws, s[good].ID.Short()))
	}
	return res
}

// Group splits snapshots by workspace, in workspace order.
func Group(snaps []Snapshot) (workspaces []string, by map[string][]Snapshot) {
	by = map[string][]Snapshot{}
	for _, s := range snaps {
		if by[s.Workspace] == nil {
			workspaces = append(workspaces, s.Workspace)
		}
		by[s.Workspace] = append(by[s.Workspace], s)
	}
	slices.Sort(workspaces)
	return workspaces, by
}
