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

// MaxExecOutput bounds ExecResult.Stdout and Stderr of the adapters' Exec:
// the first MaxExecOutput bytes of each are kept, the rest is read and
// dropped.
const MaxExecOutput = 1 << 20

// ExecOutput is where Exec collects a command's stdout and stderr, each
// bounded by MaxExecOutput.
type ExecOutput struct{ Stdout, Stderr BoundedBuffer }

// NewExecOutput returns empty output, each stream bounded by MaxExecOutput.
func NewExecOutput() *ExecOutput {
	return &ExecOutput{Stdout: BoundedBuffer{Max: MaxExecOutput}, Stderr: BoundedBuffer{Max: MaxExecOutput}}
}

// Result is the ExecResult of a command that exited with code and wrote
// the output kept in o.
func (o *ExecOutput) Result(code int) ExecResult {
	return ExecResult{ExitCode: code, Stdout: o.Stdout.Bytes(), Stderr: o.Stderr.Bytes()}
}
