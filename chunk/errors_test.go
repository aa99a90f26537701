package chunk_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"lifeboat/chunk"
	"lifeboat/internal/seedtest"
)

// chunkAll runs Next until it returns an error, keeping every chunk's
// bytes in its own buffer, and returns the bytes and the error.
func chunkAll(c *chunk.Chunker) ([]byte, error) {
	var joined []byte
	for {
		ch, err := c.Next(make([]byte, 0, 4096))
		if err != nil {
			return joined, err
		}
		joined = append(joined, ch...)
	}
}

// A reader may fail with io.ErrUnexpectedEOF of its own, bare or wrapped
// (compress/flate on a truncated stream, a pipe closed with a truncated
// pack's error in export), or with a wrapped io.EOF (an inner short read).
// That is a failure, not the end of the stream: a chunker that took it for
// one would store a truncated file and report success. Only io.EOF itself
// ends a stream.
func TestReadersUnexpectedEOFIsAnError(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	data := seedtest.Bytes(r, 3<<20)
	for _, fail := range []error{io.ErrUnexpectedEOF, fmt.Errorf("pack tail: loaded 3 of 9 bytes: %w", io.ErrUnexpectedEOF), fmt.Errorf("reading pack 1234: %w", io.EOF)} {
		// Below the minimum (Start reads it all), a little above it, and
		// many chunks long.
		for _, n := range []int{100, int(smallParams.Min) + 10, len(data)} {
			stream := func() io.Reader {
				pr, pw := io.Pipe()
				go func() {
					_, _ = pw.Write(data[:n])
					pw.CloseWithError(fail)
				}()
				return pr
			}
			c := chunk.New(stream(), testPol, smallParams)
			if got, err := chunkAll(c); err != fail {
				t.Errorf("%v after %d bytes: Next gave %d bytes and %v, want the reader's error", fail, n, len(got), err)
			}
			c = chunk.New(nil, testPol, smallParams)
			whole, done, err := c.Start(stream(), make([]byte, c.MinSize()))
			if done || (err == nil && n < c.MinSize()) {
				t.Errorf("%v after %d bytes: Start took %d bytes whole (done %v, err %v), want the reader's error", fail, n, len(whole), done, err)
				continue
			}
			if err == nil {
				if got, err := chunkAll(c); err != fail {
					t.Errorf("%v after %d bytes, after Start: Next gave %d bytes and %v, want the reader's error", fail, n, len(got), err)
				}
			} else if err != fail {
				t.Errorf("%v after %d bytes: Start = %v", fail, n, err)
			}
		}
	}
}

// flakyReader returns its first part, fails once, then returns the rest.
type flakyReader struct {
	parts  [][]byte
	failed bool
}

var errFlaky = errors.New("transient read failure")

func (r *flakyReader) Read(p []byte) (int, error) {
	if len(r.parts) == 0 {
		return 0, io.EOF
	}
	if len(r.parts[0]) == 0 {
		r.parts = r.parts[1:]
		if !r.failed {
			r.failed = true
			return 0, errFlaky
		}
		return r.Read(p)
	}
	n := copy(p, r.parts[0])
	r.parts[0] = r.parts[0][n:]
	return n, nil
}

// A read error ends the stream for the chunker: the bytes read with it and
// the carry are gone, so a Next called again (a caller retrying) must not
// go on to cut the rest into chunks that silently miss them. The error
// stays until Reset or Start, which then cut a new stream normally.
func TestReadErrorSticks(t *testing.T) {
	t.Parallel()
	r := seedtest.Rand(t)
	data := seedtest.Bytes(r, 2<<20)
	cut := 700 << 10
	c := chunk.New(&flakyReader{parts: [][]byte{bytes.Clone(data[:cut]), bytes.Clone(data[cut:])}}, testPol, smallParams)
	got, err := chunkAll(c)
	if !errors.Is(err, errFlaky) {
		t.Fatalf("Next = %v, want the reader's error", err)
	}
	for range 3 {
		ch, err := c.Next(make([]byte, 0, 4096))
		if !errors.Is(err, errFlaky) {
			t.Fatalf("Next after a read error: %d bytes, %v (%d bytes before it); want the error again", len(ch), err, len(got))
		}
	}
	c.Reset(bytes.NewReader(data))
	if got := cuts(t, c, data); len(got) == 0 {
		t.Fatal("no chunks after Reset")
	}
	c.Reset(&flakyReader{parts: [][]byte{bytes.Clone(data[:cut]), bytes.Clone(data[cut:])}})
	if _, err := chunkAll(c); !errors.Is(err, errFlaky) {
		t.Fatalf("second stream: %v", err)
	}
	head := make([]byte, c.MinSize())
	if _, done, err := c.Start(bytes.NewReader(data), head); err != nil || done {
		t.Fatalf("Start after a read error: done %v, %v", done, err)
	}
	if got := cuts(t, c, data); len(got) == 0 {
		t.Fatal("no chunks after Start")
	}
}
