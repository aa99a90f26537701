package backendtest

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"lifeboat/backend"
)

var sizes = []int{0, 1, 17, 4096, 64<<10 + 1, 5<<20 + 3}

func testRoundTrip(t *testing.T, b backend.Backend) {
	g := newGen(1)
	for _, ft := range backend.FileTypes {
		for _, n := range sizes {
			if n > 64<<10 && ft != backend.Pack {
				continue // big files are packs
			}
			t.Run(fmt.Sprintf("%s/%d", ft, n), func(t *testing.T) {
				h, data := g.handle(ft), g.data(n)
				save(t, b, h, data)
				if ft == backend.Config { // created once: make room for the next size
					t.Cleanup(func() {
						if err := b.Remove(context.Background(), h); err != nil {
							t.Errorf("Remove %s: %v", h, err)
						}
					})
				}
				wantLoad(t, b, h, data)
				fi, err := b.Stat(t.Context(), h)
				if err != nil {
					t.Fatalf("Stat %s: %v", h, err)
				}
				if fi.Size != int64(n) {
					t.Errorf("Stat %s: size %d, want %d", h, fi.Size, n)
				}
				if want := h.Name; fi.Name != want {
					t.Errorf("Stat %s: name %q, want %q", h, fi.Name, want)
				}
				if n < 100 {
					return
				}
				tail, err := b.Load(t.Context(), h, int64(n-100), 100)
				if err != nil {
					t.Fatalf("Load %s tail: %v", h, err)
				}
				if !bytes.Equal(tail, data[n-100:]) {
					t.Errorf("Load %s tail: wrong bytes", h)
				}
			})
		}
	}
}

// testConfigAlias: the config file is named by both "config" and "".
func testConfigAlias(t *testing.T, b backend.Backend) {
	data := newGen(2).data(300)
	save(t, b, backend.Handle{Type: backend.Config, Name: "config"}, data)
	wantLoad(t, b, backend.Handle{Type: backend.Config}, data)
	if fi, err := b.Stat(t.Context(), backend.Handle{Type: backend.Config}); err != nil || fi.Size != 300 {
		t.Errorf("Stat config via empty name: %+v, %v", fi, err)
	}
}
