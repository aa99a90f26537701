package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// Every command that only groups subcommands (key, repair, cat, policy,
// workspace, ...) shows its help when called alone, and refuses a word
// that is not one of its subcommands with exit 2 instead of showing the
// help and exiting 0; under --json the refusal is one exit_error line.
func TestGroupCommandsRefuseUnknownSubcommands(t *testing.T) {
	e := newEnv(t)
	var groups [][]string
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		for _, sub := range c.Commands() {
			p := append(append([]string(nil), path...), sub.Name())
			if sub.HasSubCommands() {
				groups = append(groups, p)
			}
			walk(sub, p)
		}
	}
	walk(newRootCommand(&globalOptions{out: &printer{}}), nil)
	if len(groups) < 10 {
		t.Fatalf("only %d group commands found: %v", len(groups), groups)
	}
	for _, g := range groups {
		name := "lifeboat " + strings.Join(g, " ")
		r := e.run(g...)
		if r.code != exitOK || !strings.Contains(r.stdout, "Available Commands:") || r.stderr != "" {
			t.Errorf("%s: exit %d, want its help\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
		}
		r = e.run(append(g, "bogus")...)
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, `unknown command "bogus" for "`+name+`"`) {
			t.Errorf("%s bogus: exit %d\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
		}
		r = e.run(append([]string{"--json"}, append(g, "bogus")...)...)
		lines := jsonLines(t, r.stderr)
		if r.code != exitUsage || r.stdout != "" || len(lines) != 1 || lines[0]["message_type"] != "exit_error" || lines[0]["code"] != float64(exitUsage) {
			t.Errorf("--json %s bogus: exit %d\nstdout: %s\nstderr: %s", name, r.code, r.stdout, r.stderr)
		}
	}
	// A near miss names the subcommand that was probably meant.
	for _, c := range [][]string{{"key", "lst", "list"}, {"repair", "idx", "index"}, {"cat", "conifg", "config"}} {
		if r := e.run(c[0], c[1]); r.code != exitUsage || !strings.Contains(r.stderr, `did you mean "`+c[2]+`"`) {
			t.Errorf("%s %s: exit %d: %s", c[0], c[1], r.code, r.stderr)
		}
	}
}

// `lifeboat help COMMAND...` shows that command's help; a word that is
// not a command is refused with exit 2, not answered with the usage and
// exit 0.
func TestHelpRefusesUnknownTopics(t *testing.T) {
	e := newEnv(t)
	for _, args := range [][]string{{"help"}, {"help", "capture"}, {"help", "key", "list"}} {
		if r := e.run(args...); r.code != exitOK || !strings.Contains(r.stdout, "Usage:") || r.stderr != "" {
			t.Errorf("%v: exit %d\nstdout: %s\nstderr: %s", args, r.code, r.stdout, r.stderr)
		}
	}
	if r := e.run("help", "key", "list"); !strings.Contains(r.stdout, "lifeboat key list") {
		t.Errorf("help key list shows another command's help:\n%s", r.stdout)
	}
	for _, args := range [][]string{{"help", "bogus"}, {"help", "key", "bogus"}} {
		r := e.run(args...)
		want := fmt.Sprintf("unknown help topic %q", strings.Join(args[1:], " "))
		if r.code != exitUsage || r.stdout != "" || !strings.Contains(r.stderr, want) {
			t.Errorf("%v: exit %d, want %d and %s\nstdout: %s\nstderr: %s", args, r.code, exitUsage, want, r.stdout, r.stderr)
		}
	}
}
