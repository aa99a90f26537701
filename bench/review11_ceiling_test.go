package bench

import "testing"

// The median ceiling compares rounds by the wall time each stage needs on
// the round's own cores, so rounds run with different GOMAXPROCS (the
// runtime follows a changed CPU affinity or cgroup limit) agree when each
// allowed the same: here every round allows 100 MB/s, reading 100 MB in
// 2 CPU seconds on 2 cores or 4 on 4. Stages are matched by name.
func TestReview11MedianCeilingProcs(t *testing.T) {
	round := func(procs int, read, compress float64) Ceiling {
		return Ceiling{Procs: procs, Bytes: 100e6, Files: 10, Blobs: 10,
			Stages: []StageTime{{Name: StageRead, Seconds: read}, {Name: StageCompress, Seconds: compress}}}
	}
	for _, cs := range [][]Ceiling{
		{round(2, 2, 2), round(4, 4, 4), round(4, 4, 4)},
		{round(4, 4, 4), round(2, 2, 2), round(2, 2, 2)},
	} {
		m := medianCeiling(cs)
		if m.MBps != 50 || m.Stages[0].MBps != 100 || m.Stages[1].MBps != 100 || m.Seconds != 2 {
			t.Errorf("procs %d, %d, %d: median %+v, want each stage 100 MB/s and 50 MB/s together (2 s)",
				cs[0].Procs, cs[1].Procs, cs[2].Procs, m)
		}
	}
	// A round whose stages come in another order, or lack one, is read
	// by name (no index out of range).
	a := round(2, 2, 2)
	b := round(2, 2, 2)
	b.Stages = []StageTime{b.Stages[1], b.Stages[0]}
	c := round(2, 2, 2)
	c.Stages = c.Stages[:1]
	m := medianCeiling([]Ceiling{a, b, c})
	if len(m.Stages) != 2 || m.Stages[0].Name != StageRead || m.Stages[0].MBps != 100 || m.Stages[1].MBps != 100 {
		t.Errorf("stages in other orders: %+v", m)
	}
}
