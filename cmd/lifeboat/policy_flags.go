package main

import (
	"github.com/spf13/cobra"

	"lifeboat/prune"
)

// policyFlags are the --keep-* flags of forget and policy set.
type policyFlags struct{ p prune.Policy }

var keepFlagNames = []string{"keep-last", "keep-within", "keep-hourly", "keep-daily", "keep-weekly", "keep-monthly", "keep-tag"}

func (f *policyFlags) add(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.IntVar(&f.p.Last, "keep-last", 0, "keep the N newest snapshots")
	fs.DurationVar(&f.p.Within, "keep-within", 0, "keep snapshots taken within DURATION of now (e.g. 72h)")
	fs.IntVar(&f.p.Hourly, "keep-hourly", 0, "keep the newest snapshot of each of the N newest hours that have one (UTC)")
	fs.IntVar(&f.p.Daily, "keep-daily", 0, "keep the newest snapshot of each of the N newest days (UTC)")
	fs.IntVar(&f.p.Weekly, "keep-weekly", 0, "keep the newest snapshot of each of the N newest ISO weeks")
	fs.IntVar(&f.p.Monthly, "keep-monthly", 0, "keep the newest snapshot of each of the N newest months (UTC)")
	fs.StringSliceVar(&f.p.Tags, "keep-tag", nil, "keep every snapshot with this tag (repeatable)")
}

// given reports whether any --keep-* flag was on the command line.
func (f *policyFlags) given(cmd *cobra.Command) bool {
	for _, n := range keepFlagNames {
		if cmd.Flags().Changed(n) {
			return true
		}
	}
	return false
}

// policy returns the flags' policy, checked.
func (f *policyFlags) policy() (prune.Policy, error) {
	if err := f.p.Validate(); err != nil {
		return prune.Policy{}, usageError{err.Error()}
	}
	return f.p, nil
}
