package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"lifeboat/repo"

	"lifeboat/blob"
)

type keyMessage struct {
	MessageType string      `json:"message_type"` // "key"
	ID          string      `json:"id"`
	Current     bool        `json:"current"`
	Tiers       []blob.Tier `json:"tiers"`
	Created     time.Time   `json:"created"`
	Hostname    string      `json:"hostname,omitempty"`
	Username    string      `json:"username,omitempty"`
	Error       string      `json:"error,omitempty"`
}

func newKeyListCommand(g *globalOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List key files",
		Long:  "List the repository's key files: id, the tiers each unlocks, and when and where it was made. Under --json, one \"key\" message per key.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withRepo(cmd.Context(), false, func(r *repo.Repository) (err error) {
				keys, err := r.Keys(cmd.Context())
				if err != nil {
					return err
				}
				var tw *tabwriter.Writer
				var marked []repo.KeyInfo
				for _, k := range keys {
					m := keyMessage{"key", k.ID.String(), k.Current, k.Tiers, k.Created, k.Hostname, k.Username, k.Error}
					g.out.emit(m, func(w io.Writer) {
						if tw == nil {
							tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
							fmt.Fprintln(tw, " \tID\tTIERS\tCREATED\tHOST\tUSER")
						}
						mark, tiers, created := " ", "-", "-"
						if k.Error != "" {
							mark = "!"
							marked = append(marked, k)
						}
						if k.Current {
							mark = strings.TrimSpace(mark + "*")
						}
						if len(k.Tiers) > 0 {
							tiers = tierList(k.Tiers)
						}
						if !k.Created.IsZero() {
							created = k.Created.Local().Format(time.DateTime)
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", mark, k.ID.Short(), tiers, created, k.Hostname, k.Username)
					})
				}
				if tw == nil {
					return nil
				}
				if err := tw.Flush(); err != nil {
					return err
				}
				if len(marked) > 0 {
					w := g.out.w
					fmt.Fprintln(w)
					for _, k := range marked {
						fmt.Fprintf(w, "! %s not tried: %s\n", k.ID.Short(), k.Error)
					}
					g.out.note("! marks %d key files that are not tried when the repository is opened. Remove one you did not make with `lifeboat key remove ID`; "+
						"open one an older lifeboat made beyond the KDF bounds with --key-hint ID, then change its password with `lifeboat key passwd`.", len(marked))
				}
				return nil
			})
		},
	}
}
