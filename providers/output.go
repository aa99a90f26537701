package providers

import "bytes"

// BoundedBuffer is an io.Writer for command output that keeps the first
// Max bytes written to it and drops the rest, so an adapter's Exec stays
// bounded whatever a command prints. It has no ReadFrom, so io.Copy cannot
// bypass the bound.
type BoundedBuffer struct {
	Max int
	b   bytes.Buffer
}

// Write keeps what fits and reports everything as written.
func (w *BoundedBuffer) Write(p []byte) (int, error) {
	if room := w.Max - w.b.Len(); room > 0 {
		w.b.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// Bytes returns the kept output.
func (w *BoundedBuffer) Bytes() []byte { return w.b.Bytes() }
