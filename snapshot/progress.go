package snapshot

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
