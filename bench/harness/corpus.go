package harness

import (
	"fmt"

	"lifeboat/bench"
	"lifeboat/profile/fixture"
)

// Corpora are the corpus shapes of `lifeboat-bench --corpus`: mix (the
// default) is the workspace of bench.Generate at a preset of Scales;
// binaries is the large-binary workspace of bench.GenerateBinaries at a
// preset of BinariesScales.
var Corpora = []string{"mix", "binaries"}

// corpus is one shape at one scale: how to write it, how the churn step
// changes it, and the browser profile it holds (nil: none).
type corpus struct {
	generate func(dir string, seed uint64) error
	churn    func(dir string, seed uint64, frac float64) (bench.ChurnReport, error)
	profile  *fixture.Fixture
}

// corpusNamed returns the corpus of shape ("" is mix) at the preset scale.
func corpusNamed(shape, scale string, seed uint64) (corpus, error) {
	switch shape {
	case "", "mix":
		s, err := ScaleNamed(scale)
		if err != nil {
			return corpus{}, err
		}
		return corpus{
			generate: func(dir string, seed uint64) error { return bench.Generate(dir, seed, s) },
			churn:    bench.ChurnFraction,
			profile:  bench.CorpusProfile(seed, s),
		}, nil
	case "binaries":
		s, ok := BinariesScales[scale]
		if !ok {
			return corpus{}, fmt.Errorf("unknown scale %q: use one of small, medium, full", scale)
		}
		return corpus{
			generate: func(dir string, seed uint64) error { return bench.GenerateBinaries(dir, seed, s) },
			churn:    bench.ChurnBinaries,
		}, nil
	}
	return corpus{}, fmt.Errorf("unknown corpus %q: use mix or binaries", shape)
}
