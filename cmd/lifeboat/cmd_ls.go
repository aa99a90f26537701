package main

import (
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/internal/osutil"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

type nodeMessage struct {
	MessageType string            `json:"message_type"` // "node"
	Path        string            `json:"path"`
	Type        snapshot.NodeType `json:"type"`
	Mode        uint32            `json:"mode"`
	UID         uint32            `json:"uid"`
	GID         uint32            `json:"gid"`
	User        string            `json:"user,omitempty"`
	Group       string            `json:"group,omitempty"`
	Size        uint64            `json:"size"`
	Mtime       time.Time         `json:"mtime"`
	LinkTarget  string            `json:"link_target,omitempty"`
	// PrefixOf is set for a file that kept growing while it was captured:
	// the snapshot holds its first Size bytes, verified to be exactly the
	// file's, of the PrefixOf bytes it had then (Manifest.Prefixes).
	PrefixOf uint64 `json:"prefix_of,omitempty"`
}

func newLsCommand(g *globalOptions) *cobra.Command {
	var ws string
	var skipDamaged bool
	cmd := &cobra.Command{
		Use:   "ls SNAPSHOT [PATH]",
		Short: "List the files in a snapshot",
		Long:  "List every entry of SNAPSHOT (an id, a unique id prefix, or `latest` with --workspace), or only those under PATH. Under --json, one \"node\" message each.",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix := ""
			if len(args) == 2 {
				prefix = strings.Trim(args[1], "/")
			}
			return g.withRepo(cmd.Context(), true, func(r *repo.Repository) error {
				m, skipped, err := g.resolveSnapshot(cmd.Context(), r, args[0], ws, skipDamaged, "listing")
				if err != nil {
					return err
				}
				g.emitSkipped(skipped, m)
				if m.Sensitive != nil {
					g.out.note("snapshot %s also has a sensitive part (browser profiles), not listed here; `lifeboat restore --profiles` restores it with a key that has the sensitive tier", m.ID.Short())
				}
				if m.PrefixesNotListed > 0 {
					g.out.note("snapshot %s holds %d more files captured as a verified prefix (they kept growing while read) than it lists; they are not marked here",
						m.ID.Short(), m.PrefixesNotListed)
				}
				prefixes := m.PrefixLookup()
				found := prefix == ""
				err = snapshot.Walk(cmd.Context(), r, m.Root.Subtree, "", func(p string, n *snapshot.Node) error {
					inside := prefix == "" || p == prefix || strings.HasPrefix(p, prefix+"/")
					if !inside {
						if n.Type == snapshot.TypeDir && strings.HasPrefix(prefix, p+"/") {
							return nil // on the way to PATH
						}
						return snapshot.SkipDir
					}
					found = true
					msg := nodeMessage{"node", p, n.Type, n.Mode, n.UID, n.GID, n.User, n.Group, n.Size, time.Unix(0, n.MtimeNs), string(n.LinkTarget), 0}
					if pr, ok := prefixes.Find(p); ok && n.Type == snapshot.TypeFile {
						msg.PrefixOf = pr.FileSize
					}
					g.out.emit(msg, func(w io.Writer) {
						line := fmt.Sprintf("%s %8s %8s %10d %s %s", modeString(n), owner(n.User, n.UID), owner(n.Group, n.GID), n.Size,
							msg.Mtime.Local().Format(time.DateTime), quoteName(p))
						if n.Type == snapshot.TypeSymlink {
							line += " -> " + quoteName(string(n.LinkTarget))
						}
						if msg.PrefixOf > 0 {
							line += fmt.Sprintf("  (kept growing while captured: its first %d of %d bytes, verified)", n.Size, msg.PrefixOf)
						}
						fmt.Fprintln(w, line)
					})
					return nil
				})
				if err == nil && !found {
					return fmt.Errorf("snapshot %s has no path %q (list the snapshot with `lifeboat ls %s`)", m.ID.Short(), prefix, m.ID.Short())
				}
				return err
			})
		},
	}
	cmd.Flags().StringVar(&ws, "workspace", "", "the `WORKSPACE` whose newest complete snapshot latest means")
	addSkipDamaged(cmd.Flags(), &skipDamaged)
	return cmd
}

func owner(name string, id uint32) string {
	if name != "" {
		return name
	}
	return fmt.Sprint(id)
}

// modeString renders a node's type and permission bits like ls -l.
func modeString(n *snapshot.Node) string {
	m := osutil.FileMode(n.Mode)
	switch n.Type {
	case snapshot.TypeDir:
		m |= fs.ModeDir
	case snapshot.TypeSymlink:
		m |= fs.ModeSymlink
	case snapshot.TypeFIFO:
		m |= fs.ModeNamedPipe
	case snapshot.TypeSocket:
		m |= fs.ModeSocket
	case snapshot.TypeDevice:
		m |= fs.ModeDevice
	}
	return m.String()
}

// quoteName shows a path as is when it is printable UTF-8, quoted otherwise.
func quoteName(p string) string {
	q := fmt.Sprintf("%q", p)
	if q[1:len(q)-1] == p {
		return p
	}
	return q
}
