package main

import (
	"context"
	"io"
	"time"

	"github.com/spf13/pflag"

	"lifeboat/snapshot"
)

// skippedSnapshot is a snapshot `latest --skip-damaged` passed over, and why.
type skippedSnapshot struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

// skippedSnapshotMessage is printed by ls, diff and export under --json for
// each snapshot `latest --skip-damaged` passed over, before their results.
type skippedSnapshotMessage struct {
	MessageType string `json:"message_type"` // "skipped_snapshot", or "unreadable_snapshot" (snapshots)
	skippedSnapshot
	Used string `json:"used,omitempty"` // the snapshot used instead
}

// addSkipDamaged adds --skip-damaged to a command that resolves `latest`.
func addSkipDamaged(f *pflag.FlagSet, p *bool) {
	f.BoolVar(p, "skip-damaged", false, "let latest fall back to the newest complete snapshot that can be read, past damaged ones (each is named)")
}

// resolveSnapshot resolves ref (`latest` or an id prefix) strictly, as
// snapshot.Resolve does: a snapshot that cannot be read is never passed
// over silently. With skipDamaged, `latest` may fall back; each snapshot
// passed over gets a warning on stderr naming it, its damage and what is
// used instead (verb says what for), and is returned.
func (g *globalOptions) resolveSnapshot(ctx context.Context, s snapshot.ObjectStore, ref, ws string, skipDamaged bool, verb string) (*snapshot.Manifest, []skippedSnapshot, error) {
	m, skipped, err := snapshot.Resolve(ctx, s, ref, ws, snapshot.ResolveOptions{SkipDamaged: skipDamaged})
	if err != nil {
		return nil, nil, err
	}
	var refs []skippedSnapshot
	for _, d := range skipped {
		refs = append(refs, skippedSnapshot{d.ID.String(), d.Error()})
		g.out.note("warning: `latest` skipped snapshot %s, which cannot be read (%v); %s %s of %s, the newest complete snapshot that can be read",
			d.ID.Short(), d, verb, m.ID.Short(), m.Time.UTC().Format(time.RFC3339))
	}
	return m, refs, nil
}

// emitSkipped prints a skipped_snapshot message per snapshot passed over
// for m, under --json only (text mode warned on stderr already).
func (g *globalOptions) emitSkipped(skipped []skippedSnapshot, m *snapshot.Manifest) {
	for _, s := range skipped {
		g.out.emit(skippedSnapshotMessage{"skipped_snapshot", s, m.ID.String()}, func(io.Writer) {})
	}
}
