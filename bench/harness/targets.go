package harness

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Target is one of the performance targets: against restic, checked on a run's
// medians; the first capture against the stage ceiling, round by round
// (Targets). The targets are fixed: a miss is reported, never loosened.
type Target struct {
	Name   string  `json:"name"`
	Want   string  `json:"want"`
	Got    float64 `json:"got"`
	Met    bool    `json:"met"`
	Detail string  `json:"detail,omitempty"`
}

// speedTargets are the speed-ups over restic the targets ask for.
var speedTargets = []struct {
	scenario string
	min      float64
}{
	{ScenarioFirst, 2.7}, {ScenarioUnchanged, 10}, {ScenarioChurn, 3}, {ScenarioRestore, 3}, {ScenarioPrune, 2},
}

// serveUnchangedMax is the most serve's look at an unchanged workspace
// may take, in seconds: the median of every periodic round of
// ScenarioServeRound (the server holds the key and the open index; a
// round over unchanged files captures nothing).
const serveUnchangedMax = 0.05

// ceilingShare is the share of the stage ceiling a first capture must reach.
const ceilingShare = 0.9

// CeilingShares pairs each round's first capture by Lifeboat with the
// stage ceiling measured around it (the two share the machine's state):
// the capture's MB/s over the ceiling's, in the order of the rounds'
// ceilings. Dividing the medians instead would pair a capture and a
// ceiling from different rounds.
func (r *Report) CeilingShares() []float64 {
	var out []float64
	for _, c := range r.Ceilings {
		if x, ok := r.firstCapture(c.Round); ok && c.MBps > 0 {
			out = append(out, x.MBps/c.MBps)
		}
	}
	return out
}

// firstCapture is Lifeboat's first capture in round.
func (r *Report) firstCapture(round int) (Result, bool) {
	for _, x := range r.Results {
		if x.Round == round && x.Tool == "lifeboat" && x.Scenario == ScenarioFirst {
			return x, true
		}
	}
	return Result{}, false
}

// Targets checks the run against the performance targets: the first capture
// against the stage ceiling measured around it, the median of the
// rounds' shares (CeilingShares); the rest against restic, on the
// medians (none when restic did not run).
func (r *Report) Targets() []Target {
	out := []Target{}
	if shares := r.CeilingShares(); len(shares) > 0 {
		got := median(shares)
		parts := make([]string, len(shares))
		for i, x := range shares {
			parts[i] = fmt.Sprintf("%.1f%%", 100*x)
		}
		detail := "per round " + strings.Join(parts, ", ")
		if lb, ok := r.Median("lifeboat", ScenarioFirst); ok {
			detail += fmt.Sprintf("; medians %.1f of %.1f MB/s", lb.MBps, r.Ceiling.MBps)
		}
		out = append(out, Target{Name: "first-capture throughput / what the stages allow together on all cores", Want: fmt.Sprintf(">= %.2f", ceilingShare),
			Got: got, Met: got >= ceilingShare, Detail: detail})
	}
	if x, ok := r.Median("lifeboat", ScenarioServeRound); ok {
		detail := fmt.Sprintf("%d periodic rounds, CPU %.3f s a round", len(x.Samples), x.CPU)
		if c, ok := r.Median("lifeboat", ScenarioServeUnchanged); ok {
			detail += fmt.Sprintf("; a capture asked through the API: %.3f s", c.Seconds)
		}
		out = append(out, Target{Name: ScenarioServeRound + " seconds (median of every round)", Want: fmt.Sprintf("<= %g", serveUnchangedMax),
			Got: x.Seconds, Met: x.Seconds <= serveUnchangedMax, Detail: detail})
	}
	ratio := func(sc string) (Ratio, bool) {
		for _, x := range r.Ratios {
			if x.Peer == "restic" && x.Scenario == sc {
				return x, true
			}
		}
		return Ratio{}, false
	}
	for _, t := range speedTargets {
		if x, ok := ratio(t.scenario); ok {
			out = append(out, Target{Name: t.scenario + " speed-up over restic", Want: fmt.Sprintf(">= %gx", t.min), Got: x.Speedup, Met: x.Speedup >= t.min})
		}
	}
	for _, sc := range Scenarios {
		if x, ok := ratio(sc); ok {
			out = append(out, Target{Name: sc + " peak RSS / restic's", Want: "<= 1", Got: x.RSS, Met: x.RSS <= 1})
		}
	}
	if x, ok := ratio(ScenarioChurn); ok {
		out = append(out, Target{Name: "repository size / restic's (after the churn capture)", Want: "<= 1.05", Got: x.Repo, Met: x.Repo <= 1.05})
	}
	return out
}

// writeTargets prints the targets table, if restic ran.
func (r *Report) writeTargets(w io.Writer) error {
	ts := r.Targets()
	if len(ts) == 0 {
		return nil
	}
	fmt.Fprintf(w, "\nperformance targets (against restic, on the medians; the first capture against the ceiling of its round; serve's periodic round in seconds)\n")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	met := 0
	for _, t := range ts {
		verdict := "MISSED"
		if t.Met {
			verdict, met = "met", met+1
		}
		fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\n", t.Name, t.Want, t.Got, verdict)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d of %d met\n", met, len(ts))
	return err
}
