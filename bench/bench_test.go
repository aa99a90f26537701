package bench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/profile/fixture/localstorage"
)

func TestGenerateIsDeterministicAndCompareSeesChurn(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	small := Scale{SourceFiles: 30, DepFiles: 20, BinaryMiB: 1, LogKiB: 8}
	if err := Generate(a, 7, small); err != nil {
		t.Fatal(err)
	}
	if err := Generate(b, 7, small); err != nil {
		t.Fatal(err)
	}
	d, err := Compare(a, b)
	if err != nil || len(d) != 0 {
		t.Fatalf("same seed differs: %v %v", d, err)
	}
	n, err := Churn(b, 1)
	if err != nil || n == 0 {
		t.Fatalf("churn: %d %v", n, err)
	}
	d, err = Compare(a, b)
	if err != nil || len(d) < n {
		t.Fatalf("compare after churn of %d paths found %d differences: %v", n, len(d), d)
	}
	if err := os.Chmod(filepath.Join(a, "run.sh"), 0o700); err != nil {
		t.Fatal(err)
	}
	d, _ = Compare(a, b)
	found := false
	for _, x := range d {
		found = found || filepath.Base(x[:len("run.sh")]) == "run.sh"
	}
	if !found {
		t.Fatalf("mode change not seen: %v", d)
	}
}

// churnTwice churns a and b, two equal corpora, the same way, checks
// that the reports and the trees are equal, and returns the report and a
// copy of a from before the churn.
func churnTwice(t *testing.T, a, b string, churn func(dir string) (ChurnReport, error)) (ChurnReport, string) {
	t.Helper()
	pristine := filepath.Join(t.TempDir(), "pristine")
	if err := CopyTree(a, pristine); err != nil {
		t.Fatal(err)
	}
	var reps [2]ChurnReport
	for i, d := range []string{a, b} {
		var err error
		if reps[i], err = churn(d); err != nil {
			t.Fatal(err)
		}
	}
	if reps[0] != reps[1] {
		t.Fatalf("churn reports differ: %+v %+v", reps[0], reps[1])
	}
	if d, err := Compare(a, b); err != nil || len(d) != 0 {
		t.Fatalf("same churn of the same corpus differs: %v %v", d, err)
	}
	return reps[0], pristine
}

// smallMix is the small preset of bench/harness: every part of the mix,
// the browser profile with its localStorage in a LevelDB.
var smallMix = Scale{SourceFiles: 300, DepFiles: 2000, BinaryMiB: 2, LogKiB: 256, GitPackMiB: 2, BlobsMiB: []int{1, 3},
	RecordMiB: 2, Databases: 2, DBRows: 500, Profile: true, LocalStorage: localstorage.LevelDB{}}

func TestScaleSmallIsDeterministicWithChurn(t *testing.T) {
	s := smallMix
	a, b := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	for _, d := range []string{a, b} {
		if err := Generate(d, 42, s); err != nil {
			t.Fatal(err)
		}
	}
	if d, err := Compare(a, b); err != nil || len(d) != 0 {
		t.Fatalf("same seed differs: %v %v", d, err)
	}
	c := filepath.Join(t.TempDir(), "c")
	if err := Generate(c, 43, s); err != nil {
		t.Fatal(err)
	}
	if d, _ := Compare(a, c); len(d) == 0 {
		t.Fatal("another seed gives the same corpus")
	}
	st, err := Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{GitPackRel, RecordRel, "data/db/app0.sqlite", "blobs/archive-1.tar.zst", ProfileRel + "/Default/Network/Cookies", ProfileRel + "/Default/Local Storage/leveldb/CURRENT"} {
		if _, err := os.Stat(filepath.Join(a, rel)); err != nil {
			t.Errorf("mix part missing: %v", err)
		}
	}
	if st.Files < s.SourceFiles+s.DepFiles {
		t.Fatalf("corpus has %d files, want at least %d", st.Files, s.SourceFiles+s.DepFiles)
	}
	r, pristine := churnTwice(t, a, b, func(dir string) (ChurnReport, error) { return ChurnFraction(dir, 9, 0.05) })
	if r.Edited != 15 || r.Deleted != 20 || r.Added != 20+1 || r.DBUpdates != 2*25 || r.Appended < 2*4096 {
		t.Fatalf("churn of 5%% of the small corpus: %+v", r)
	}
	st2, err := Stat(a)
	if err != nil {
		t.Fatal(err)
	}
	if st2.Files != st.Files+r.Added-r.Deleted || st2.Bytes <= st.Bytes {
		t.Fatalf("after churn %+v, before %+v, report %+v", st2, st, r)
	}
	if d, err := Compare(pristine, a); err != nil || len(d) < r.Paths() {
		t.Fatalf("churn touched %d paths, compare found %d: %v", r.Paths(), len(d), err)
	}
	for _, rel := range []string{"data/db/app0.sqlite", "data/db/app0.sqlite-journal"} {
		_, err := os.Stat(filepath.Join(a, rel))
		if want := strings.HasSuffix(rel, "journal"); os.IsNotExist(err) != want {
			t.Errorf("%s: %v", rel, err)
		}
	}
}
