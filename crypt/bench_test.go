package crypt_test

import (
	"math/rand/v2"
	"testing"

	"lifeboat/blob"
	"lifeboat/crypt"
)

const benchSize = 1 << 20

func benchData(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	return randBytes(r, n)
}

func BenchmarkBlobID(b *testing.B) {
	k := crypt.NewTierKeys(blob.Workspace, crypt.NewRandomKey(), crypt.NewRandomKey())
	data := benchData(benchSize)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		k.BlobID(data)
	}
}

// BenchmarkBlobIDParallel hashes on every CPU -cpu allows, as the backup
// pipeline does.
func BenchmarkBlobIDParallel(b *testing.B) {
	k := crypt.NewTierKeys(blob.Workspace, crypt.NewRandomKey(), crypt.NewRandomKey())
	data := benchData(benchSize)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			k.BlobID(data)
		}
	})
}

func BenchmarkSeal(b *testing.B) {
	s := crypt.NewSealer(crypt.NewRandomKey())
	data := benchData(benchSize)
	dst := make([]byte, 0, benchSize+crypt.Overhead)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		dst = s.Seal(dst[:0], data, []byte("aad"))
	}
}

func BenchmarkOpen(b *testing.B) {
	s := crypt.NewSealer(crypt.NewRandomKey())
	sealed := s.Seal(nil, benchData(benchSize), []byte("aad"))
	dst := make([]byte, 0, benchSize)
	b.SetBytes(benchSize)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if dst, err = s.Open(dst[:0], sealed, []byte("aad")); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkKDFDefault is the cost of opening a key file with the default
// argon2id parameters (48 MiB, 4 passes, 4 lanes).
func BenchmarkKDFDefault(b *testing.B) {
	m := crypt.NewMasterKeys()
	data, err := crypt.NewKeyFile(m, blob.Tiers, []byte("pw"), crypt.NewKDFParams(0, 0, 0), blob.ID{}, crypt.KeyFileMeta{}, nil)
	if err != nil {
		b.Fatal(err)
	}
	kf, err := crypt.DecodeKeyFile(data)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := kf.Open([]byte("pw"), blob.ID{}); err != nil {
			b.Fatal(err)
		}
	}
}
