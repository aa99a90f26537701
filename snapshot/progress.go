package snapshot

import "fmt"

// Progress receives counts from a capture or restore as they happen. The
// CLI renders it as a bar on a terminal, as JSON lines under --json, or not
// at all. Methods are called from many goroutines; implementations must be
// safe for concurrent use and fast.
type Progress interface {
	// Start announces the totals once they are known (zero when unknown).
	Start(files, bytes uint64)
	// Done counts finished files and their bytes.
	Done(files, bytes uint64)
	// Error reports a path that could not be handled; the operation goes on.
	Error(path string, err error)
}

// NoProgress ignores everything.
type NoProgress struct{}

func (NoProgress) Start(uint64, uint64) {}
func (NoProgress) Done(uint64, uint64)  {}
func (NoProgress) Error(string, error)  {}

// HumanBytes renders n with a binary unit, for messages.
func HumanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
