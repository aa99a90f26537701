package docker

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"lifeboat/providers"
	"lifeboat/providers/docker/dockertest"
	"lifeboat/providers/providertest"
)

// BenchmarkFiles measures the archive endpoints on a 64 MiB workspace of
// 256 files: WriteFiles+Switch (upload) and ReadFiles (the whole tree
// pulled into the mirror, as every capture does).
func BenchmarkFiles(b *testing.B) {
	d := dockertest.Start(b)
	p := providertest.MustNew(b, New, Config{Host: d.Host, Image: dockertest.Image, Command: dockertest.Command, Network: "none", CacheDir: b.TempDir()})
	ctx := context.Background()
	id, err := p.Create(ctx, providers.CreateSpec{IdempotencyKey: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	src := b.TempDir()
	buf := make([]byte, 256<<10)
	for i := range 256 {
		for j := range buf {
			buf[j] = byte(i*31 + j*7)
		}
		dir := filepath.Join(src, fmt.Sprintf("d%02d", i%16))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%03d", i)), buf, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Write", func(b *testing.B) {
		b.SetBytes(64 << 20)
		for b.Loop() {
			st, err := p.WriteFiles(ctx, id, src)
			if err == nil {
				err = p.Switch(ctx, id, st)
			}
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Read", func(b *testing.B) {
		b.SetBytes(64 << 20)
		for b.Loop() {
			f, err := p.ReadFiles(ctx, id)
			if err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
}
