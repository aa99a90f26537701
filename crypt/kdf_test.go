package crypt_test

import (
	"bytes"
	"errors"
	"testing"

	"lifeboat/crypt"
)

func TestKDFValidate(t *testing.T) {
	t.Parallel()
	ok := crypt.KDFParams{Algorithm: "argon2id", Time: 1, MemoryKiB: 8, Threads: 1, Salt: make([]byte, 32)}
	cases := []struct {
		name  string
		edit  func(*crypt.KDFParams)
		valid bool
	}{
		{"smallest", func(*crypt.KDFParams) {}, true},
		{"defaults", func(p *crypt.KDFParams) { p.Time, p.MemoryKiB, p.Threads = 3, 64*1024, 4 }, true},
		{"largest", func(p *crypt.KDFParams) {
			p.Time, p.MemoryKiB, p.Threads = crypt.MaxKDFTime, crypt.MaxKDFMemoryKiB, 255
		}, true},
		{"256 MiB, 8 passes", func(p *crypt.KDFParams) { p.Time, p.MemoryKiB, p.Threads = 8, 256*1024, 4 }, true},
		{"argon2i", func(p *crypt.KDFParams) { p.Algorithm = "argon2i" }, false},
		{"no algorithm", func(p *crypt.KDFParams) { p.Algorithm = "" }, false},
		{"time 0", func(p *crypt.KDFParams) { p.Time = 0 }, false},
		{"time 9", func(p *crypt.KDFParams) { p.Time = 9 }, false},
		{"time 16 (older bound)", func(p *crypt.KDFParams) { p.Time = 16 }, false},
		{"time 17", func(p *crypt.KDFParams) { p.Time = 17 }, false},
		{"time 1e9", func(p *crypt.KDFParams) { p.Time = 1e9 }, false},
		{"memory 7 KiB", func(p *crypt.KDFParams) { p.MemoryKiB = 7 }, false},
		{"memory 256 MiB + 1 KiB", func(p *crypt.KDFParams) { p.MemoryKiB = 256*1024 + 1 }, false},
		{"memory 1 GiB (older bound)", func(p *crypt.KDFParams) { p.MemoryKiB = 1024 * 1024 }, false},
		{"memory 1 GiB + 1 KiB", func(p *crypt.KDFParams) { p.MemoryKiB = 1024*1024 + 1 }, false},
		{"memory 100 GiB", func(p *crypt.KDFParams) { p.MemoryKiB = 100 * 1024 * 1024 }, false},
		{"memory max uint32", func(p *crypt.KDFParams) { p.MemoryKiB = 1<<32 - 1 }, false},
		{"threads 0", func(p *crypt.KDFParams) { p.Threads = 0 }, false},
		{"below 8 KiB per thread", func(p *crypt.KDFParams) { p.Threads, p.MemoryKiB = 2, 15 }, false},
		{"8 KiB per thread", func(p *crypt.KDFParams) { p.Threads, p.MemoryKiB = 2, 16 }, true},
		{"255 threads, too little memory", func(p *crypt.KDFParams) { p.Threads, p.MemoryKiB = 255, 2039 }, false},
		{"salt nil", func(p *crypt.KDFParams) { p.Salt = nil }, false},
		{"salt 31", func(p *crypt.KDFParams) { p.Salt = make([]byte, 31) }, false},
		{"salt 33", func(p *crypt.KDFParams) { p.Salt = make([]byte, 33) }, false},
	}
	for _, c := range cases {
		p := ok
		c.edit(&p)
		err := p.Validate()
		if (err == nil) != c.valid {
			t.Errorf("%s: Validate() = %v, want valid=%v", c.name, err, c.valid)
		}
		// Too many passes or too much memory, and only that, is ErrKDFCost.
		costly := p.Time > crypt.MaxKDFTime || p.MemoryKiB > crypt.MaxKDFMemoryKiB
		if errors.Is(err, crypt.ErrKDFCost) != (costly && p.Algorithm == "argon2id" && p.Time > 0 && p.Threads > 0 && len(p.Salt) == 32) {
			t.Errorf("%s: Validate() = %v; ErrKDFCost wanted exactly for parameters beyond the cost bounds", c.name, err)
		}
	}
}

func TestNewKDFParams(t *testing.T) {
	t.Parallel()
	d := crypt.NewKDFParams(0, 0, 0)
	if d.Algorithm != "argon2id" || d.Time != crypt.DefaultKDFTime || d.MemoryKiB != crypt.DefaultKDFMemoryKiB || d.Threads != crypt.DefaultKDFThreads {
		t.Fatalf("defaults: %+v", d)
	}
	if err := d.Validate(); err != nil {
		t.Fatalf("default parameters do not validate: %v", err)
	}
	p := crypt.NewKDFParams(2, 128, 1)
	if p.Time != 2 || p.MemoryKiB != 128 || p.Threads != 1 || len(p.Salt) != 32 {
		t.Fatalf("explicit: %+v", p)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(p.Salt, crypt.NewKDFParams(2, 128, 1).Salt) {
		t.Fatal("two parameter sets share a salt")
	}
}
