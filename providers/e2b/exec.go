package e2b

import (
	"context"
	"io"

	"lifeboat/providers"
)

// execScript runs "$@" in the workspace (made when absent), with stdin
// from the uploaded file $2 when there is one (removed once open). Run
// with the working directory at home, so both paths are relative to it.
const execScript = `set -e; ws=$1; in=$2; shift 2
if [ -n "$in" ]; then exec 0<"$in"; rm -f "$in"; fi
mkdir -p "$ws"; cd "$ws"; exec "$@"`

// Exec implements providers.Provider through envd's process.Process/Start:
// argv runs in the workspace directory as Config.User; stdin, when given,
// is uploaded to <home>/.lifeboat/stdin.* first and read from there.
// Stdout and stderr are kept up to 4 MiB each.
func (p *Provider) Exec(ctx context.Context, id providers.InstanceID, argv []string, stdin io.Reader) (providers.ExecResult, error) {
	const op = "exec"
	if len(argv) == 0 {
		return providers.ExecResult{}, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindInvalid, Err: errNoArgv}
	}
	e, err := p.envd(ctx, op, id)
	if err != nil {
		return providers.ExecResult{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.TransferTimeout)
	defer cancel()
	in := ""
	if stdin != nil {
		in = lifeboatDir + "/stdin." + randHex(8)
		if err := e.upload(ctx, op, in, stdin); err != nil {
			return providers.ExecResult{}, err
		}
	}
	return e.run(ctx, op, ".", append([]string{"/bin/sh", "-c", execScript, "sh", p.cfg.Workspace, in}, argv...))
}
