package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"lifeboat/repo"
)

type initOptions struct {
	packSizeMiB int
	compression string
	kdf         kdfFlags
}

type initMessage struct {
	MessageType string `json:"message_type"` // "initialized"
	Repository  string `json:"repository"`
	ID          string `json:"id"`
	KeyID       string `json:"key_id"`
}

func newInitCommand(g *globalOptions) *cobra.Command {
	var o initOptions
	cmd := &cobra.Command{
		Use:   "init",
		Short: "Create a new repository",
		Long:  "Create a new, empty repository at --repo with a first key that unlocks every tier. The password comes from --password-file, LIFEBOAT_PASSWORD_FILE, LIFEBOAT_PASSWORD or a prompt.",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runInit(cmd, g, o)
		},
	}
	cmd.Flags().IntVar(&o.packSizeMiB, "pack-size", 16, "target pack size in MiB")
	cmd.Flags().StringVar(&o.compression, "compression", "fastest", "zstd level for new blobs: off, fastest, default or better")
	o.kdf.add(cmd.Flags())
	return cmd
}

func runInit(cmd *cobra.Command, g *globalOptions, o initOptions) error {
	c, err := repo.ParseCompression(o.compression)
	if err != nil {
		return usageError{err.Error()}
	}
	if o.packSizeMiB < 1 || o.packSizeMiB > 512 {
		return usageError{fmt.Sprintf("--pack-size %d: want 1 to 512 MiB", o.packSizeMiB)}
	}
	kdf, err := o.kdf.checked()
	if err != nil {
		return err
	}
	pw, err := g.password("password for the new repository: ", true)
	if err != nil {
		return err
	}
	defer clear(pw)
	be, err := g.openBackend(cmd.Context(), true)
	if err != nil {
		return initError(err)
	}
	defer be.Close()
	res, err := repo.Init(cmd.Context(), be, pw, repo.InitOptions{PackSize: o.packSizeMiB << 20, Compression: c, KDF: kdf, KeyCache: g.kekCache()})
	if err != nil {
		return initError(err)
	}
	g.out.emit(initMessage{"initialized", be.Location(), res.ID.String(), res.KeyID.String()}, func(w io.Writer) {
		fmt.Fprintf(w, "created repository %s at %s\nkey %s unlocks the workspace and sensitive tiers\nKeep the password safe: without it the data cannot be read.\n",
			res.ID.Short(), be.Location(), res.KeyID.Short())
	})
	return nil
}

// initError adds the next step to init's refusal of a location that holds
// a repository, unless the message already gives one (a repository whose
// config is missing: put it back, or choose another location).
func initError(err error) error {
	if errors.Is(err, repo.ErrRepoExists) && !strings.Contains(err.Error(), "another location") {
		return fmt.Errorf("%w; to make a new repository, choose another location with --repo (or LIFEBOAT_REPO)", err)
	}
	return err
}
