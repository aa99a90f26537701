package harness

import (
	"fmt"
	"sort"
	"strings"

	"lifeboat/bench"
	"lifeboat/profile/fixture/localstorage"
)

// Scales are the named corpus presets of `lifeboat-bench --scale`: small
// runs in seconds (tests, CI), medium in a few minutes, full is the mix
// the published numbers use (100,040 files, 833 MB). Each holds a browser
// profile with its localStorage in a LevelDB.
var Scales = map[string]bench.Scale{
	"small": {SourceFiles: 300, DepFiles: 2000, BinaryMiB: 2, LogKiB: 256, GitPackMiB: 2, BlobsMiB: []int{1, 3},
		RecordMiB: 2, Databases: 2, DBRows: 500, Profile: true, LocalStorage: localstorage.LevelDB{}},
	"medium": {SourceFiles: 4000, DepFiles: 16000, BinaryMiB: 50, LogKiB: 2048, GitPackMiB: 20, BlobsMiB: []int{60},
		RecordMiB: 16, Databases: 3, DBRows: 4000, Profile: true, LocalStorage: localstorage.LevelDB{}},
	"full": {SourceFiles: 20000, DepFiles: 80000, BinaryMiB: 200, LogKiB: 16384, GitPackMiB: 120, BlobsMiB: []int{50, 120},
		RecordMiB: 100, Databases: 4, DBRows: 8000, Profile: true, LocalStorage: localstorage.LevelDB{}},
}

// BinariesScales are the presets of `lifeboat-bench --corpus binaries`: a
// workspace dominated by large binaries (bench.GenerateBinaries). Full is
// about 71,000 files and 2.2 GB, medium a quarter of it, small a few MB.
var BinariesScales = map[string]bench.BinariesScale{
	"small": {Libs: 12, LibMaxMiB: 4, BrowserMiB: []int{3, 2}, BrowserFiles: 60, Docs: 150, DataFiles: 9, DataMaxMiB: 1, ModFiles: 600},
	"medium": {Libs: 105, LibMaxMiB: 30, BrowserMiB: []int{60, 45, 40}, BrowserFiles: 750, Docs: 2250, DataFiles: 105, DataMaxMiB: 8,
		ModFiles: 14125},
	"full": {Libs: 420, LibMaxMiB: 30, BrowserMiB: []int{190, 140, 110, 80, 60}, BrowserFiles: 3000, Docs: 9000, DataFiles: 420,
		DataMaxMiB: 8, ModFiles: 56500},
}

// ScaleNamed returns the preset called name.
func ScaleNamed(name string) (bench.Scale, error) {
	s, ok := Scales[name]
	if !ok {
		names := make([]string, 0, len(Scales))
		for n := range Scales {
			names = append(names, n)
		}
		sort.Strings(names)
		return bench.Scale{}, fmt.Errorf("unknown scale %q: use one of %s", name, strings.Join(names, ", "))
	}
	return s, nil
}
