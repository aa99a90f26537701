package backendtest

import (
	"errors"
	"maps"
	"testing"

	"lifeboat/backend"
)

func testList(t *testing.T, b backend.Backend) {
	g := newGen(6)
	want := map[backend.FileType]map[string]int64{}
	for _, ft := range backend.FileTypes {
		want[ft] = map[string]int64{}
		n := 5
		if ft == backend.Pack {
			n = 40 // spread over many shards
		}
		if ft == backend.Config {
			n = 1
		}
		for i := range n {
			h, data := g.handle(ft), g.data(i*7)
			save(t, b, h, data)
			want[ft][h.Name] = int64(len(data))
		}
	}
	for _, ft := range backend.FileTypes {
		if got := listAll(t, b, ft); !maps.Equal(got, want[ft]) {
			t.Errorf("List %s: got %v, want %v", ft, got, want[ft])
		}
	}
	if err := b.List(t.Context(), "bogus", func(backend.FileInfo) error { return nil }); err == nil {
		t.Errorf("List of an unknown file type: no error")
	}
}

func testListEmpty(t *testing.T, b backend.Backend) {
	for _, ft := range backend.FileTypes {
		if got := listAll(t, b, ft); len(got) != 0 {
			t.Errorf("List %s of empty backend: %v", ft, got)
		}
	}
}

func testListStops(t *testing.T, b backend.Backend) {
	g := newGen(7)
	for range 5 {
		save(t, b, g.handle(backend.Key), g.data(3))
		save(t, b, g.handle(backend.Pack), g.data(3))
	}
	stop := errors.New("stop here")
	for _, ft := range []backend.FileType{backend.Key, backend.Pack} {
		calls := 0
		err := b.List(t.Context(), ft, func(backend.FileInfo) error {
			calls++
			return stop
		})
		wantErr(t, "List with failing fn", err, stop)
		if calls != 1 {
			t.Errorf("List %s: fn called %d times after returning an error, want 1", ft, calls)
		}
	}
}
