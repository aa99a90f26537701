package e2b

import (
	"errors"
	"fmt"
)

var (
	errEmptyID = errors.New("empty sandbox id")
	errNoID    = errors.New("POST /sandboxes answered without a sandboxID")
)

func errState(s string) error {
	return fmt.Errorf("sandbox is in state %q, neither running nor paused", s)
}

var (
	errNotFound = errors.New("GET /sandboxes/{id} answered 404 (Inspect confirms whether it is missing)")
	errPaused   = errors.New("the sandbox is paused: resume it first")
)

var errNoSnapshotID = errors.New("POST /sandboxes/{id}/snapshots answered without a snapshotID")
