package daytona

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"path"
	"strings"

	"lifeboat/providers"
	"lifeboat/providers/boxfiles"
	"lifeboat/providers/httpapi"
)

// execTimeout is the timeout, in seconds, asked of the toolbox for one
// command: archiving or unpacking a large workspace takes a while.
const execTimeout = 1800

// box is the Daytona toolbox for boxfiles.
type box struct{ p *Provider }

func toolboxPath(id providers.InstanceID, route string) string {
	return "/toolbox/" + url.PathEscape(string(id)) + "/toolbox/" + route
}

// Upload implements boxfiles.Box: POST .../files/upload?path= with the
// file as the multipart field "file".
func (b box) Upload(ctx context.Context, id providers.InstanceID, p string, r io.Reader, _ int64) error {
	pr, ctype := httpapi.MultipartFile("file", path.Base(p), r)
	hdr := http.Header{"Content-Type": {ctype}}
	err := boxfiles.Upload(ctx, &b.p.d, id, http.MethodPost, toolboxPath(id, "files/upload")+"?"+url.Values{"path": {p}}.Encode(), hdr, pr)
	pr.Close()
	return err
}

// Download implements boxfiles.Box: GET .../files/download?path=.
func (b box) Download(ctx context.Context, id providers.InstanceID, p string, w io.Writer) error {
	return boxfiles.Download(ctx, &b.p.d, id, http.MethodGet, toolboxPath(id, "files/download")+"?"+url.Values{"path": {p}}.Encode(), nil, nil, w, p)
}

// runScript runs "$@" with stderr into the file $2 (under the directory
// $1, made first), so the execute answer's result is stdout alone.
const runScript = `mkdir -p "$1" || exit 125; e=$2; shift 2; "$@" 2>"$e"`

// Run implements boxfiles.Box: POST .../process/execute with the words
// single-quoted; stderr is read back from a file, then removed.
func (b box) Run(ctx context.Context, id providers.InstanceID, dir string, argv []string) (providers.ExecResult, error) {
	l := b.p.Files.Layout
	tmpDir := relTo(dir, path.Join(l.Parent(), l.Area(), "tmp"))
	errName := boxfiles.TmpName("stderr")
	errRel := path.Join(tmpDir, errName)
	cmd := append([]string{"sh", "-c", runScript, "lifeboat", tmpDir, errRel}, argv...)
	var out struct {
		ExitCode int    `json:"exitCode"`
		Result   string `json:"result"`
	}
	if _, err := b.p.d.Do(ctx, "exec", id, http.MethodPost, toolboxPath(id, "process/execute"), map[string]any{"command": Quote(cmd), "cwd": dir, "timeout": execTimeout}, &out); err != nil {
		return providers.ExecResult{}, err
	}
	res := providers.ExecResult{ExitCode: out.ExitCode}
	stdout := providers.BoundedBuffer{Max: providers.MaxExecOutput}
	stdout.Write([]byte(out.Result))
	res.Stdout = stdout.Bytes()
	if out.ExitCode == 125 {
		res.Stderr = []byte(out.Result)
		return res, nil
	}
	stderr := providers.BoundedBuffer{Max: providers.MaxExecOutput}
	abs := path.Join(l.Parent(), l.Area(), "tmp", errName)
	if err := b.Download(ctx, id, abs, &stderr); err != nil {
		return providers.ExecResult{}, err
	}
	res.Stderr = stderr.Bytes()
	rm := []string{"rm", "-f", errRel}
	_, _ = b.p.d.Do(ctx, "exec", id, http.MethodPost, toolboxPath(id, "process/execute"), map[string]any{"command": Quote(rm), "cwd": dir}, nil)
	return res, nil
}

// relTo is target relative to dir (both absolute and clean).
func relTo(dir, target string) string {
	d, t := strings.Split(strings.Trim(dir, "/"), "/"), strings.Split(strings.Trim(target, "/"), "/")
	if dir == "/" {
		d = nil
	}
	i := 0
	for i < len(d) && i < len(t) && d[i] == t[i] {
		i++
	}
	parts := make([]string, 0, len(d)-i+len(t)-i)
	for range d[i:] {
		parts = append(parts, "..")
	}
	parts = append(parts, t[i:]...)
	if len(parts) == 0 {
		return "."
	}
	return strings.Join(parts, "/")
}

// Quote joins argv into one command line of single-quoted words, as a
// POSIX shell (or Daytona's word splitting) reads it back.
func Quote(argv []string) string {
	var b bytes.Buffer
	for i, a := range argv {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString("'" + strings.ReplaceAll(a, "'", `'\''`) + "'")
	}
	return b.String()
}
