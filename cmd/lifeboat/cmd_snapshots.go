package main

import (
	"bytes"
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/blob"
	"lifeboat/repo"
	"lifeboat/snapshot"
)

type snapshotMessage struct {
	MessageType string          `json:"message_type"` // "snapshot"
	ID          string          `json:"id"`
	Workspace   string          `json:"workspace"`
	Time        time.Time       `json:"time"`
	Host        string          `json:"host,omitempty"`
	Instance    string          `json:"instance,omitempty"`
	Paths       []string        `json:"paths"`
	Tags        []string        `json:"tags,omitempty"`
	Parent      string          `json:"parent,omitempty"`
	Complete    bool            `json:"complete"`
	Totals      snapshot.Totals `json:"totals"`
	Errors      int             `json:"errors"`
	// Sensitive: the snapshot has a sensitive part (browser profiles),
	// whatever the key in use can open; totals count workspace files only.
	Sensitive bool `json:"sensitive"`
	// Prefixes are the files captured as a verified prefix (they kept
	// growing while read), as in the capture's summary; [] when none.
	Prefixes          []snapshot.CapturePrefix `json:"prefixes"`
	PrefixesNotListed uint64                   `json:"prefixes_not_listed"`
}

func snapshotMsg(m *snapshot.Manifest) snapshotMessage {
	msg := snapshotMessage{MessageType: "snapshot", ID: m.ID.String(), Workspace: m.Workspace, Time: m.Time, Host: m.Host,
		Instance: m.Instance, Paths: m.Paths, Tags: m.Tags, Complete: m.Complete, Totals: m.Totals, Errors: len(m.Errors),
		Sensitive: m.Sensitive != nil, Prefixes: append([]snapshot.CapturePrefix{}, m.Prefixes...), PrefixesNotListed: m.PrefixesNotListed}
	if m.Parent != nil {
		msg.Parent = m.Parent.String()
	}
	return msg
}

func newSnapshotsCommand(g *globalOptions) *cobra.Command {
	var ws string
	cmd := &cobra.Command{
		Use:   "snapshots",
		Short: "List snapshots",
		Long:  "List the snapshots of every workspace, or of one with --workspace, oldest first. Under --json, one \"snapshot\" message each.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) error {
				snaps, bad, err := snapshot.List(cmd.Context(), r, ws)
				if err != nil {
					return err
				}
				var tw *tabwriter.Writer
				for _, m := range snaps {
					g.out.emit(snapshotMsg(m), func(w io.Writer) {
						if tw == nil {
							tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
							fmt.Fprintln(tw, "ID\tTIME\tWORKSPACE\tHOST\tFILES\tSIZE\tSTATE")
						}
						state := "complete"
						if !m.Complete {
							state = fmt.Sprintf("partial (%s)", count(len(m.Errors), "error"))
						}
						if m.Sensitive != nil {
							state += ", +profiles"
						}
						if n := uint64(len(m.Prefixes)) + m.PrefixesNotListed; n == 1 {
							state += ", 1 file a verified prefix"
						} else if n > 1 {
							state += fmt.Sprintf(", %d files verified prefixes", n)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", m.ID.Short(), m.Time.Local().Format(time.DateTime), m.Workspace, m.Host,
							m.Totals.Files, snapshot.HumanBytes(m.Totals.Bytes), state)
					})
				}
				if tw != nil {
					_ = tw.Flush()
				}
				if len(snaps) == 0 && len(bad) == 0 {
					if ws != "" {
						g.out.note("no snapshots of workspace %q in this repository", ws)
					} else {
						g.out.note("no snapshots in this repository")
					}
				}
				ids := slices.SortedFunc(maps.Keys(bad), func(a, b blob.ID) int { return bytes.Compare(a[:], b[:]) })
				for _, id := range ids {
					g.out.note("snapshot %s does not load: %v", id.Short(), bad[id])
					g.out.emit(skippedSnapshotMessage{MessageType: "unreadable_snapshot", skippedSnapshot: skippedSnapshot{id.String(), bad[id].Error()}},
						func(io.Writer) {})
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVar(&ws, "workspace", "", "only this workspace")
	return cmd
}
