package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"lifeboat/cmd/lifeboat/internal/gcfloor"
	"lifeboat/internal/jsonlines"
	"lifeboat/repo"
)

// Garbage collector settings unless GOGC and GOMEMLIMIT say otherwise.
// Lifeboat's heap is mostly blob and chunk buffers without pointers, so a
// collection is cheap and running one sooner costs little: with GOGC 25 a
// first capture of the benchmark corpus peaks at 117 MiB RSS in the same
// time as at 153 MiB with GOGC 50 and 190 MiB with 100. But a small heap
// is not collected below the floor (cmd/lifeboat/internal/gcfloor): at GOGC 25 alone
// an unchanged re-capture of that corpus, about 12 MiB live, collected
// every MiB or two and took 0.54 s; with the 16 MiB floor it takes 0.42 s
// at the same peak RSS (64 MiB, the key derivation's). The soft limit caps
// the rest.
const (
	defaultGCPercent   = 25
	defaultMemoryLimit = 256 << 20
	defaultHeapFloor   = 16 << 20
)

func main() {
	if os.Getenv("GOGC") == "" {
		gcfloor.Start(defaultGCPercent, defaultHeapFloor)
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(defaultMemoryLimit)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code. Tests call it
// directly with their own streams.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	g := &globalOptions{stdin: stdin, out: &printer{w: stdout, errw: stderr, json: jsonlines.Requested(args)}}
	root := newRootCommand(g)
	// Warnings of the repository package (a key file set aside when it is
	// opened) are printed like the command's own: text on stderr, nothing
	// under --json.
	ctx = repo.WithWarn(ctx, func(msg string) { g.out.note("warning: %s", msg) })
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		err = g.out.err
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted by a signal (SIGINT or SIGTERM) before it finished; run the command again (%w)", ctx.Err())
		}
		code := exitCode(err)
		g.out.exitError(err, code)
		return code
	}
	return exitOK
}
