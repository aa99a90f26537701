// Command lifeboat-bench measures a lifeboat binary's capture, re-capture,
// churn, restore and prune on a seeded corpus, side by side with restic and
// borg (docs/performance.md). It is a tool for developers, apart from the
// product: the lifeboat binary links none of it.
//
// This binary is also the trampoline that starts each measured tool (see
// harness.Trampoline), so main calls harness.Trampoline first.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"lifeboat/bench/harness"
	"lifeboat/internal/jsonlines"
)

// Exit codes, as lifeboat's (docs/exit-codes.md).
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

func main() {
	harness.Trampoline() // when started by the harness to measure a tool
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// usageError is a bad command line or option: exit 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

// run executes one command line and returns its exit code. Tests call it
// directly with their own streams.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &options{out: stdout, errw: stderr, json: jsonlines.Requested(args)}
	cmd := newCommand(o)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	if ctx.Err() != nil {
		err = ctx.Err()
	}
	code := exitError
	if errors.As(err, new(usageError)) || errors.Is(err, harness.ErrOption) {
		code = exitUsage
	}
	if o.json {
		b, _ := json.Marshal(struct {
			MessageType string `json:"message_type"`
			Code        int    `json:"code"`
			Message     string `json:"message"`
		}{"exit_error", code, err.Error()})
		fmt.Fprintf(stderr, "%s\n", b)
	} else {
		fmt.Fprintf(stderr, "lifeboat-bench: %v\n", err)
	}
	return code
}

// emit writes v as one JSON line under --json, or calls text otherwise.
func (o *options) emit(v any, text func(w io.Writer)) {
	if !o.json {
		text(o.out)
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(o.errw, "lifeboat-bench: %v\n", err)
		return
	}
	fmt.Fprintf(o.out, "%s\n", b)
}

// note writes a line for a person on stderr; --json leaves it out.
func (o *options) note(format string, args ...any) {
	if !o.json {
		fmt.Fprintf(o.errw, format+"\n", args...)
	}
}
