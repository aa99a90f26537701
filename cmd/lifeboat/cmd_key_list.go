package main

import (
	"fmt"
	"io"
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
				for _, k := range keys {
					m := keyMessage{"key", k.ID.String(), k.Current, k.Tiers, k.Created, k.Hostname, k.Username, k.Error}
					g.out.emit(m, func(w io.Writer) {
						if tw == nil {
							tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
							fmt.Fprintln(tw, " \tID\tTIERS\tCREATED\tHOST\tUSER")
						}
						cur := " "
						if k.Current {
							cur = "*"
						}
						if k.Error != "" {
							fmt.Fprintf(tw, "!\t%s\tunreadable: %s\t\t\t\n", k.ID.Short(), k.Error)
							return
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", cur, k.ID.Short(), tierList(k.Tiers), k.Created.Local().Format(time.DateTime), k.Hostname, k.Username)
					})
				}
				if tw != nil {
					return tw.Flush()
				}
				return nil
			})
		},
	}
}
