package harness

import "testing"

// The median ceiling compares rounds by the wall time each stage needs on
// the round's own cores, so rounds run with different GOMAXPROCS (the
// runtime follows a changed CPU affinity or cgroup limit) agree when each
// allowed the same: here every round allows 100 MB/s, reading 100 MB in
// 2 CPU seconds on 2 cores or 4 on 4. Stages are matched by name.
func TestMedianCeilingAcrossProcs(t *testing.T) {
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

// A round's ceiling brackets Lifeboat's first capture: each stage's time
// is the mean of the measurements before and after it (by name, as wall
// time on each one's cores), and both measurements' MB/s are kept.
func TestBracketCeiling(t *testing.T) {
	before := Ceiling{Procs: 2, Bytes: 100e6, Files: 10, Blobs: 9,
		Stages: []StageTime{{Name: StageRead, Seconds: 1}, {Name: StageCompress, Seconds: 3}}}
	after := Ceiling{Procs: 4, Bytes: 100e6, Files: 10, Blobs: 11,
		Stages: []StageTime{{Name: StageCompress, Seconds: 10}, {Name: StageRead, Seconds: 6}}}
	before.total()
	after.total()
	m := bracketCeiling(before, after)
	// Read: 0.5 and 1.5 s of wall time, 1 s on average, 2 CPU seconds on
	// the first's 2 cores; compress: 1.5 and 2.5, so 2 s, 4 CPU seconds.
	if len(m.Stages) != 2 || m.Stages[0].Name != StageRead || m.Stages[0].Seconds != 2 || m.Stages[0].MBps != 100 ||
		m.Stages[1].Name != StageCompress || m.Stages[1].Seconds != 4 || m.Stages[1].MBps != 50 {
		t.Errorf("stages %+v, want read 2 s (100 MB/s), compress 4 s (50 MB/s)", m.Stages)
	}
	if len(m.Measured) != 2 || m.Measured[0] != before.MBps || m.Measured[1] != after.MBps {
		t.Errorf("measured %v, want %v and %v", m.Measured, before.MBps, after.MBps)
	}
	if m.Procs != 2 || m.Bytes != 100e6 || m.Files != 10 || m.Blobs != 10 || m.Seconds != 3 || m.MBps != 100.0/3 {
		t.Errorf("bracketed %+v", m)
	}
}
