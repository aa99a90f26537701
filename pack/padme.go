package pack

import "math/bits"

// padme returns the Padmé length for n (Nikitin et al., "Reducing Metadata
// Leakage from Encrypted Files and Communication with PURBs", PETS 2019):
// n rounded up so that only the top ~log2(log2 n)+1 bits may be set. The
// overhead is at most 12%, and the result leaks O(log log n) bits of n.
func padme(n int64) int64 {
	if n < 2 {
		return n
	}
	e := int64(bits.Len64(uint64(n))) - 1 // floor(log2 n)
	s := int64(bits.Len64(uint64(e)))     // floor(log2 e) + 1
	mask := int64(1)<<(e-s) - 1
	return (n + mask) &^ mask
}
