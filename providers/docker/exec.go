package docker

import (
	"context"
	"io"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/client"

	"lifeboat/providers"
)

// Exec implements providers.Provider: the command runs through the exec
// API in the workspace directory, as the container's user, without a TTY;
// stdout and stderr come back demultiplexed (the first
// providers.MaxExecOutput bytes of each), the exit code from exec inspect. A container that is not running
// (stopped, paused) is KindConflict.
func (p *Provider) Exec(ctx context.Context, id providers.InstanceID, argv []string, stdin io.Reader) (providers.ExecResult, error) {
	const op = "exec"
	if err := checkID(op, id); err != nil {
		return providers.ExecResult{}, err
	}
	if err := providers.CheckCommand(Name, op, id, argv); err != nil {
		return providers.ExecResult{}, err
	}
	if err := p.needRunning(ctx, op, id); err != nil {
		return providers.ExecResult{}, err
	}
	res, err := p.exec(ctx, id, argv, stdin)
	return res, wrap(op, id, err)
}

// exec runs argv in the container and waits for it.
func (p *Provider) exec(ctx context.Context, id providers.InstanceID, argv []string, stdin io.Reader) (providers.ExecResult, error) {
	cr, err := p.cli.ExecCreate(ctx, string(id), client.ExecCreateOptions{Cmd: argv, WorkingDir: p.cfg.Workdir,
		AttachStdout: true, AttachStderr: true, AttachStdin: stdin != nil})
	if err != nil {
		if noSuchContainer(err) {
			return providers.ExecResult{}, newErr("exec", id, providers.KindConflict, "container %s does not exist (Inspect confirms whether it is missing)", id)
		}
		return providers.ExecResult{}, ctxErr(ctx, err)
	}
	att, err := p.cli.ExecAttach(ctx, cr.ID, client.ExecAttachOptions{})
	if err != nil {
		return providers.ExecResult{}, ctxErr(ctx, err)
	}
	defer att.Close()
	stop := context.AfterFunc(ctx, att.Close)
	defer stop()
	if stdin != nil {
		// stdin is fed while the output is read; a command that exits
		// without reading it all ends the feeding (the connection is
		// closed), and what it did not read is not an error of Exec.
		go func() {
			_, _ = io.Copy(att.Conn, stdin)
			_ = att.CloseWrite()
		}()
	}
	out := providers.NewExecOutput()
	_, err = stdcopy.StdCopy(&out.Stdout, &out.Stderr, att.Reader)
	att.Close()
	if err != nil {
		return providers.ExecResult{}, ctxErr(ctx, err)
	}
	ins, err := p.cli.ExecInspect(ctx, cr.ID, client.ExecInspectOptions{})
	if err != nil {
		return providers.ExecResult{}, ctxErr(ctx, err)
	}
	return out.Result(ins.ExitCode), nil
}
