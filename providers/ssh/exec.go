package ssh

import (
	"context"
	"errors"
	"io"
	"strings"

	"golang.org/x/crypto/ssh"

	"lifeboat/providers"
)

// Exec implements providers.Provider: argv runs through the remote user's
// shell as `cd <instance dir> && exec <argv>`, every word single-quoted, so
// no argument is reinterpreted. A non-zero exit is a result; a session that
// ended without an exit status (killed by a signal, connection lost) is
// KindUnavailable; a cancelled ctx closes the connection (sshd then hangs
// up the command) and returns KindUnavailable.
func (p *Provider) Exec(ctx context.Context, id providers.InstanceID, argv []string, stdin io.Reader) (providers.ExecResult, error) {
	const op = "exec"
	if err := checkID(op, id); err != nil {
		return providers.ExecResult{}, err
	}
	if err := providers.CheckCommand(Name, op, id, argv); err != nil {
		return providers.ExecResult{}, err
	}
	c, err := p.dial(ctx, op, id)
	if err != nil {
		return providers.ExecResult{}, err
	}
	defer c.Close()
	if err := p.needInstance(c, op, id); err != nil {
		return providers.ExecResult{}, wrap(op, id, ctxErr(ctx, err))
	}
	s, err := c.ssh.NewSession()
	if err != nil {
		return providers.ExecResult{}, wrap(op, id, ctxErr(ctx, err))
	}
	defer s.Close()
	out := providers.NewExecOutput()
	s.Stdin, s.Stdout, s.Stderr = stdin, &out.Stdout, &out.Stderr
	words := make([]string, len(argv))
	for i, a := range argv {
		words[i] = shQuote(a)
	}
	err = s.Run("cd " + shQuote(p.instDir(id)) + " && exec " + strings.Join(words, " "))
	var ee *ssh.ExitError
	if errors.As(err, &ee) && ee.Signal() == "" {
		return out.Result(ee.ExitStatus()), nil
	}
	if err != nil {
		return out.Result(-1), wrap(op, id, ctxErr(ctx, err))
	}
	return out.Result(0), nil
}

// shQuote quotes s for a POSIX shell.
func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
