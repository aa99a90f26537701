package local

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"path/filepath"

	"lifeboat/providers"
)

// Exec implements providers.Provider: argv runs directly (no shell) with
// the instance directory as its working directory and this process's
// environment. A non-zero exit is a result, not an error; a command that
// cannot be started is KindInvalid; a cancelled ctx kills it and returns
// KindUnavailable.
func (p *Provider) Exec(ctx context.Context, id providers.InstanceID, argv []string, stdin io.Reader) (providers.ExecResult, error) {
	const op = "exec"
	if err := checkID(op, id); err != nil {
		return providers.ExecResult{}, err
	}
	if err := providers.CheckCommand(Name, op, id, argv); err != nil {
		return providers.ExecResult{}, err
	}
	r, err := p.openExisting(ctx, op, id)
	if err != nil {
		return providers.ExecResult{}, err
	}
	r.Close()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Dir = filepath.Join(p.root, string(id))
	cmd.Stdin = stdin
	out := providers.NewExecOutput()
	cmd.Stdout, cmd.Stderr = &out.Stdout, &out.Stderr
	if err := cmd.Start(); err != nil {
		if ctx.Err() != nil {
			return providers.ExecResult{}, wrap(op, id, ctx.Err())
		}
		return providers.ExecResult{}, invalid(op, id, "command %q cannot be started: %v", argv[0], err)
	}
	err = cmd.Wait()
	res := out.Result(cmd.ProcessState.ExitCode())
	if ctx.Err() != nil {
		return res, wrap(op, id, ctx.Err())
	}
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return res, wrap(op, id, err)
	}
	return res, nil
}
