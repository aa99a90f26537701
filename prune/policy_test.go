package prune

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"lifeboat/blob"
)

var t0 = time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)

// snaps makes one snapshot every step back from t0, newest first by index.
func snaps(n int, step time.Duration, partial ...int) []Snapshot {
	out := make([]Snapshot, n)
	for i := range out {
		out[i] = Snapshot{ID: blob.ID{byte(i), 1}, Workspace: "w", Time: t0.Add(-time.Duration(i) * step), Complete: !slices.Contains(partial, i)}
	}
	return out
}

func kept(r Result) []int {
	var out []int
	for _, d := range r.Decisions {
		if d.Keep {
			out = append(out, int(d.Snapshot.ID[0]))
		}
	}
	return out
}

func TestApplyRules(t *testing.T) {
	t.Parallel()
	hourly := snaps(72, time.Hour) // three days, one per hour
	cases := []struct {
		name string
		p    Policy
		s    []Snapshot
		want []int
	}{
		{"last", Policy{Last: 3}, snaps(10, time.Hour), []int{0, 1, 2}},
		{"within", Policy{Within: 150 * time.Minute}, snaps(10, time.Hour), []int{0, 1, 2}},
		{"hourly", Policy{Hourly: 2}, snaps(6, 30*time.Minute), []int{0, 1}},
		// 12:00 is newest of the 10th, then the 23:00 of the 9th and the 8th.
		{"daily", Policy{Daily: 3}, hourly, []int{0, 13, 37}},
		{"weekly", Policy{Weekly: 2}, snaps(20, 24*time.Hour), []int{0, 2}},
		{"monthly", Policy{Monthly: 2}, snaps(40, 24*time.Hour), []int{0, 10}},
		{"tags", Policy{Tags: []string{"keep"}}, func() []Snapshot {
			s := snaps(5, time.Hour)
			s[3].Tags = []string{"x", "keep"}
			return s
		}(), []int{0, 3}},
		// The newest is partial: last 1 keeps it, and the last good root is the next.
		{"partial newest", Policy{Last: 1}, snaps(5, time.Hour, 0), []int{0, 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Apply(tc.p, "w", tc.s, t0)
			if got := kept(r); !slices.Equal(got, tc.want) {
				t.Fatalf("kept %v, want %v", got, tc.want)
			}
			for _, d := range r.Decisions {
				if d.Keep != (len(d.Reasons) > 0) {
					t.Fatalf("snapshot %d: keep %v with reasons %v", d.Snapshot.ID[0], d.Keep, d.Reasons)
				}
			}
		})
	}
}

func TestApplyReasons(t *testing.T) {
	t.Parallel()
	r := Apply(Policy{Last: 2, Daily: 1}, "w", snaps(3, time.Hour), t0)
	got := fmt.Sprint(r.Decisions[0].Reasons)
	if got != "[last 2 daily 2026-03-10 last good root]" {
		t.Fatalf("reasons %s", got)
	}
	if len(r.Decisions[2].Reasons) != 0 || r.Decisions[2].Keep {
		t.Fatalf("third snapshot: %+v", r.Decisions[2])
	}
}

func TestApplyKeepsNothingWarnsAndKeepsLastGoodRoot(t *testing.T) {
	t.Parallel()
	s := snaps(4, time.Hour, 0, 1) // two newest are partial
	r := Apply(Policy{}, "w", s, t0)
	if got := kept(r); !slices.Equal(got, []int{2}) {
		t.Fatalf("kept %v, want only the newest complete (2)", got)
	}
	if len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "keeps no snapshot") {
		t.Fatalf("warnings %q", r.Warnings)
	}
	if r.Decisions[2].Reasons[0] != RuleLastGoodRoot {
		t.Fatalf("reason %v", r.Decisions[2].Reasons)
	}
	// Only partial snapshots: nothing is a last good root, and that is said.
	r = Apply(Policy{Last: 1}, "w", snaps(3, time.Hour, 0, 1, 2), t0)
	if got := kept(r); !slices.Equal(got, []int{0}) || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "no complete snapshot") {
		t.Fatalf("kept %v, warnings %q", got, r.Warnings)
	}
}

func TestPolicyValidateAndString(t *testing.T) {
	t.Parallel()
	if (Policy{Last: -1}).Validate() == nil || (Policy{Within: -time.Second}).Validate() == nil {
		t.Fatal("negative values accepted")
	}
	if !(Policy{}).Empty() || (Policy{Tags: []string{"a"}}).Empty() {
		t.Fatal("Empty")
	}
	if s := (Policy{Last: 5, Within: time.Hour, Tags: []string{"x"}}).String(); s != "keep last 5 within 1h0m0s tag x" {
		t.Fatal(s)
	}
}

func TestGroup(t *testing.T) {
	t.Parallel()
	s := []Snapshot{{Workspace: "b"}, {Workspace: "a"}, {Workspace: "b"}}
	ws, by := Group(s)
	if !slices.Equal(ws, []string{"a", "b"}) || len(by["b"]) != 2 {
		t.Fatal(ws, by)
	}
}
