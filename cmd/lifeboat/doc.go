// Command lifeboat checkpoints and restores agent sandbox workspaces into an
// encrypted, deduplicating repository.
//
// The CLI is thin: each command is one cmd_*.go file with its options, flags
// and a run function that calls into the packages; output goes through one
// printer (text, or JSON lines with a message_type under --json), and
// exitcode.go is the one place errors become exit codes. No logic lives
// only here.
package main
