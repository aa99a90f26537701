package pack

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

func TestWorthCompressing(t *testing.T) {
	t.Parallel()
	enc, err := encoderFor(CompressFastest, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(3, 3))
	random := make([]byte, 1<<20)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	text := bytes.Repeat([]byte("func main() { fmt.Println(\"hello\") }\n"), 1<<20/38)
	mixed := append(append([]byte{}, text[:len(text)/2]...), random[:len(random)/2]...)
	// Only the first slice compresses: it settles the blob alone (the
	// decision is the three slices' too; BenchmarkWorthCompressing shows
	// the time it saves).
	textHead := append(append([]byte{}, text[:sampleSize]...), random[sampleSize:]...)
	// The first slice does not compress, the later ones do.
	textTail := append(append([]byte{}, random[:len(random)/2]...), text[:len(random)/2]...)
	// In every 8 KiB, 1 KiB of text and 7 of random bytes: the first slice
	// saves about an eighth, too little to settle it alone; the three
	// samples save as much, enough.
	sparse := make([]byte, 0, 1<<20)
	for len(sparse) < 1<<20 {
		sparse = append(append(sparse, text[:1<<10]...), random[len(sparse):len(sparse)+7<<10]...)
	}
	// Random bytes, then machine-code-like ones: the end slice compresses
	// by its literals alone.
	codeTail := append(append([]byte{}, random[:3<<18]...), skewedBytes(rng, 1<<18)...)
	cases := map[string]struct {
		data []byte
		want bool
	}{
		"random":       {random, false},
		"text":         {text, true},
		"mixed":        {mixed, true},
		"text head":    {textHead, true},
		"text tail":    {textTail, true},
		"sparse text":  {sparse, true},
		"code tail":    {codeTail, true},
		"small random": {random[:1000], true}, // small blobs are always tried
	}
	for name, c := range cases {
		if got := worthCompressing(enc, c.data); got != c.want {
			t.Errorf("%s: worthCompressing = %v, want %v", name, got, c.want)
		}
	}
}

// A writer filled while Fits says yes finishes within its limit.
func TestWriterStaysWithinLimit(t *testing.T) {
	t.Parallel()
	k := crypt.NewMasterKeys()
	tk, _ := k.Tier(blob.Workspace)
	rng := rand.New(rand.NewPCG(5, 5))
	for _, limit := range []int{64 << 10, 1 << 20, 3<<20 + 17} {
		w := NewWriter(tk, limit)
		for {
			data := make([]byte, 1+rng.IntN(limit/8))
			sb, err := SealBlob(tk, blob.Data, tk.BlobID(data), data, CompressOff)
			if err != nil {
				t.Fatal(err)
			}
			if !w.Fits(len(sb.Data)) {
				break
			}
			w.Add(sb)
		}
		data, _, _, _, _ := w.Finish()
		if len(data) > limit {
			t.Errorf("limit %d: pack of %d bytes", limit, len(data))
		}
	}
}
