package repotest

import (
	"bytes"
	"sync"
	"testing"
	"testing/synctest"

	"lifeboat/blob"
	"lifeboat/crypt"
	"lifeboat/pack"
)

// Bubble runs f in a testing/synctest bubble (synctest.Test), for a test
// that moves time around repositories it makes inside: they read the
// bubble's clock, and time.Sleep moves it at once. Before the bubble it
// makes the process-wide codecs every repository shares (see makeCodecs).
func Bubble(t *testing.T, f func(*testing.T)) {
	t.Helper()
	makeCodecs(t)
	synctest.Test(t, f)
}

var codecsOnce sync.Once

// makeCodecs makes pack's shared zstd encoder of every compression level,
// for small and large blobs, and its decoder, once per test binary, by
// sealing and checking a blob at each. Codecs made first inside a bubble
// would belong to it, and the next test outside the bubble that
// compresses or decompresses a blob would crash ("receive on synctest
// channel from outside bubble").
func makeCodecs(t testing.TB) {
	t.Helper()
	codecsOnce.Do(func() {
		k := crypt.NewTierKeys(blob.Workspace, crypt.NewRandomKey(), crypt.NewRandomKey())
		for _, c := range []pack.Compression{pack.CompressFastest, pack.CompressDefault, pack.CompressBetter} {
			for _, n := range []int{512, 64 << 10} { // below and above the fastest level's small-blob rule
				sb, err := pack.SealBlob(k, blob.Data, blob.ID{}, bytes.Repeat([]byte("lifeboat "), n/9), c)
				if err != nil {
					t.Fatalf("making the %s zstd codecs: %v", c, err)
				}
				if sb.Flags&pack.FlagZstd == 0 {
					t.Fatalf("a %d-byte blob of repeated text was not compressed at %s: the codecs are not made", n, c)
				}
				sb.Release()
			}
		}
	})
}
