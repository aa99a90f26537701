package crypt

import (
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

const hugePage = 2 << 20

// prefaultHuge readies n bytes of Go heap, backed by transparent huge
// pages where the kernel allows them, for the allocation that follows.
//
// argon2 allocates its whole memory cost at once and touches every page.
// The Go runtime does not ask Linux for huge pages, so on a system whose
// THP mode is "madvise" (the common default) 64 MiB costs 16,384 page
// faults, which took 0.2 s of a 0.3 s key derivation on the project's VMs
// when argon2's lanes fault in parallel. Here the same memory is allocated
// once, advised MADV_HUGEPAGE, touched (32 faults, shared by up to four
// goroutines: on a VM that hands back free memory to its host, each fault
// also costs the host's fault, 60-75 ms in all on one core) and freed;
// argon2's allocation right after reuses those pages. Nothing depends on
// it for correctness: if the runtime hands argon2 other memory, only the
// speed-up is lost.
func prefaultHuge(n int) {
	b := make([]byte, n+hugePage)
	start := uintptr(unsafe.Pointer(&b[0]))
	off := int((hugePage - start%hugePage) % hugePage)
	_ = unix.Madvise(b[off:off+n], unix.MADV_HUGEPAGE) // advisory; an old kernel may refuse
	// The kernel zeroes each huge page as it is first touched; the cores
	// share the touching, as argon2's lanes would.
	var wg sync.WaitGroup
	workers := min(runtime.GOMAXPROCS(0), 4)
	step := (len(b)/workers + hugePage - 1) / hugePage * hugePage
	for lo := 0; lo < len(b); lo += step {
		wg.Go(func() {
			for i := lo; i < min(lo+step, len(b)); i += 4096 {
				b[i] = 1
			}
		})
	}
	wg.Wait()
	runtime.KeepAlive(b)
	b = nil
	runtime.GC()
}
