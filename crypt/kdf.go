package crypt

import (
	"crypto/rand"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"golang.org/x/crypto/argon2"
)

// KDFParams are the argon2id parameters stored in a key file.
type KDFParams struct {
	Algorithm string `json:"algorithm"` // always "argon2id"
	Time      uint32 `json:"time"`      // passes over memory
	MemoryKiB uint32 `json:"memory_kib"`
	Threads   uint8  `json:"threads"`
	Salt      []byte `json:"salt"` // 32 random bytes
}

// Default argon2id cost: 4 passes over 48 MiB with 4 lanes, about 0.1 s.
// That is as many block computations as RFC 9106's 3 passes over 64 MiB
// (borg 2's choice) and more than OWASP's strongest listed setting (46 MiB,
// 1 pass). 48 MiB rather than 64 because the derivation's memory sets the
// peak of every short command (an unchanged re-capture peaks during it):
// at 64 MiB that peak was above restic's whole re-capture (its scrypt
// takes 32 MiB), at 48 MiB it is below.
const (
	DefaultKDFTime      = 4
	DefaultKDFMemoryKiB = 48 * 1024
	DefaultKDFThreads   = 4
)

// Bounds a key file's parameters must respect before we spend memory or
// time on them (docs/format.md 4.1): `lifeboat key add` creates nothing
// beyond them, and opening refuses a key file beyond them before it
// derives anything, so a key file anyone with write access to the
// repository adds costs at most one derivation of 256 MiB and 8 passes.
const (
	MinKDFMemoryKiB = 8
	MaxKDFMemoryKiB = 256 * 1024 // 256 MiB
	MaxKDFTime      = 8
	saltSize        = 32
)

// The bounds of older Lifeboats, whose `key add` could create key files
// of up to 1 GiB and 16 passes. Such a key file still decodes (so it is
// listed with its metadata and counts for the last-key guards), but it is
// derived only through OpenAboveBounds, which a caller uses only for a key
// file the user named. Nothing beyond these is ever derived.
const (
	legacyMaxKDFMemoryKiB = 1024 * 1024 // 1 GiB
	legacyMaxKDFTime      = 16
)

// ErrKDFCost: a key file's argon2id parameters ask for more memory or
// passes than the bounds allow. Nothing was derived.
var ErrKDFCost = errors.New("argon2id cost beyond the bounds")

// NewKDFParams returns parameters with a fresh salt. Zero arguments take the
// defaults; tests pass a small memory to stay fast.
func NewKDFParams(time, memoryKiB uint32, threads uint8) KDFParams {
	if time == 0 {
		time = DefaultKDFTime
	}
	if memoryKiB == 0 {
		memoryKiB = DefaultKDFMemoryKiB
	}
	if threads == 0 {
		threads = DefaultKDFThreads
	}
	salt := make([]byte, saltSize)
	if _, err := rand.Read(salt); err != nil {
		panic(fmt.Sprintf("crypto/rand failed: %v", err))
	}
	return KDFParams{Algorithm: "argon2id", Time: time, MemoryKiB: memoryKiB, Threads: threads, Salt: salt}
}

// Validate refuses parameters we do not support or that cost more than the
// bounds allow (the cost with an error wrapping ErrKDFCost).
func (p KDFParams) Validate() error { return p.validate(MaxKDFTime, MaxKDFMemoryKiB) }

// validateLegacy is Validate with the bounds of older Lifeboats.
func (p KDFParams) validateLegacy() error { return p.validate(legacyMaxKDFTime, legacyMaxKDFMemoryKiB) }

func (p KDFParams) validate(maxTime, maxMemoryKiB uint32) error {
	switch {
	case p.Algorithm != "argon2id":
		return fmt.Errorf("unsupported kdf %q (want argon2id)", p.Algorithm)
	case p.Time < 1:
		return fmt.Errorf("kdf time 0: at least 1 pass")
	case p.MemoryKiB < MinKDFMemoryKiB:
		return fmt.Errorf("kdf memory %d KiB is below %d KiB", p.MemoryKiB, MinKDFMemoryKiB)
	case p.Threads < 1:
		return fmt.Errorf("kdf threads must be at least 1")
	case uint64(p.MemoryKiB) < 8*uint64(p.Threads):
		return fmt.Errorf("kdf memory %d KiB is below %d KiB, the minimum with %d lanes (8 KiB per lane)", p.MemoryKiB, 8*uint64(p.Threads), p.Threads)
	case len(p.Salt) != saltSize:
		return fmt.Errorf("kdf salt is %d bytes, want %d", len(p.Salt), saltSize)
	case p.Time > maxTime || p.MemoryKiB > maxMemoryKiB:
		return fmt.Errorf("%w: %d passes over %d KiB, where at most %d passes and %d KiB (%d MiB) are allowed",
			ErrKDFCost, p.Time, p.MemoryKiB, maxTime, maxMemoryKiB, maxMemoryKiB>>10)
	}
	return nil
}

// Cost is the argon2id work of these parameters: passes times KiB.
func (p KDFParams) Cost() uint64 { return uint64(p.Time) * uint64(p.MemoryKiB) }

// prefaultMinKiB is the smallest memory cost worth readying huge pages for.
const prefaultMinKiB = 8 << 10

// keyDerivations counts derive calls in this process.
var keyDerivations atomic.Uint64

// KeyDerivations returns how many password key derivations (argon2id)
// this process has done: one per key file created or opened with a
// password. A long-running server that keeps its unlocked keys in memory
// should not see it move after start-up.
func KeyDerivations() uint64 { return keyDerivations.Load() }

// derive turns a password into a key-encryption key.
func (p KDFParams) derive(password []byte) Key {
	keyDerivations.Add(1)
	var k Key
	if p.MemoryKiB >= prefaultMinKiB {
		prefaultHuge(int(p.MemoryKiB) << 10)
	}
	out := argon2.IDKey(password, p.Salt, p.Time, p.MemoryKiB, p.Threads, KeySize)
	if p.MemoryKiB >= prefaultMinKiB {
		// Give argon2's memory back to the system now, not when the
		// runtime's scavenger gets to it: what the command touches next
		// (its heap, the pages of the local index it opens) would
		// otherwise add to those still-resident pages, and the process's
		// peak memory, measured 63-92 MiB for the same unchanged
		// re-capture, with it.
		debug.FreeOSMemory()
	}
	copy(k[:], out)
	clear(out)
	return k
}
