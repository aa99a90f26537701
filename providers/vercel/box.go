package vercel

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"

	"lifeboat/providers"
	"lifeboat/providers/boxfiles"
)

// maxLogs bounds how much of a command's log stream is read: both outputs
// at their bound, with room for JSON escaping and framing.
const maxLogs = 16 * providers.MaxExecOutput

// box is the Vercel data plane for boxfiles.
type box struct{ p *Provider }

// Upload implements boxfiles.Box: POST .../fs/write with a gzipped tar
// holding the one file, x-cwd its directory (as the SDK's writeFiles).
func (b box) Upload(ctx context.Context, id providers.InstanceID, p string, r io.Reader, size int64) error {
	pr, pw := io.Pipe()
	go func() {
		zw := gzip.NewWriter(pw)
		tw := tar.NewWriter(zw)
		err := tw.WriteHeader(&tar.Header{Name: path.Base(p), Mode: 0o600, Size: size, Typeflag: tar.TypeReg, Format: tar.FormatPAX})
		if err == nil {
			_, err = io.CopyN(tw, r, size)
		}
		if err == nil {
			err = tw.Close()
		}
		if err == nil {
			err = zw.Close()
		}
		pw.CloseWithError(err)
	}()
	hdr := http.Header{"Content-Type": {"application/gzip"}, "X-Cwd": {path.Dir(p)}}
	err := boxfiles.Upload(ctx, &b.p.d, id, http.MethodPost, b.p.q(sandboxPath(id)+"/fs/write"), hdr, pr)
	pr.Close()
	return err
}

// Download implements boxfiles.Box: POST .../fs/read.
func (b box) Download(ctx context.Context, id providers.InstanceID, p string, w io.Writer) error {
	body, _ := json.Marshal(map[string]string{"path": p})
	hdr := http.Header{"Content-Type": {"application/json"}}
	return boxfiles.Download(ctx, &b.p.d, id, http.MethodPost, b.p.q(sandboxPath(id)+"/fs/read"), hdr, bytesReader(body), w, p)
}

type command struct {
	ID       string `json:"id"`
	ExitCode *int   `json:"exitCode"`
}

// Run implements boxfiles.Box: POST .../cmd with wait=true answers two
// ndjson lines (the command, then the command with its exit code); the
// output comes from GET .../cmd/{cmdId}/logs.
func (b box) Run(ctx context.Context, id providers.InstanceID, dir string, argv []string) (providers.ExecResult, error) {
	const op = "exec"
	body, _ := json.Marshal(map[string]any{"command": argv[0], "args": argv[1:], "cwd": dir, "env": map[string]string{}, "sudo": false, "wait": true})
	hdr := http.Header{"Content-Type": {"application/json"}}
	resp, err := boxfiles.Stream(ctx, &b.p.d, op, id, http.MethodPost, b.p.q(sandboxPath(id)+"/cmd"), hdr, bytesReader(body))
	if err != nil {
		return providers.ExecResult{}, err
	}
	var last command
	dec := json.NewDecoder(bufio.NewReader(resp.Body))
	for {
		var line struct {
			Command command `json:"command"`
		}
		err := dec.Decode(&line)
		if err == io.EOF {
			break
		}
		if err != nil {
			resp.Body.Close()
			return providers.ExecResult{}, boxfiles.Failed(ctx, &b.p.d, op, id, "reading the command stream", err)
		}
		last = line.Command
	}
	resp.Body.Close()
	if last.ID == "" || last.ExitCode == nil {
		return providers.ExecResult{}, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindUnavailable,
			Err: errors.New("the command stream ended before the command finished")}
	}
	res := providers.ExecResult{ExitCode: *last.ExitCode}
	lr, err := boxfiles.Stream(ctx, &b.p.d, op, id, http.MethodGet, b.p.q(sandboxPath(id)+"/cmd/"+last.ID+"/logs"), nil, nil)
	if err != nil {
		return providers.ExecResult{}, err
	}
	defer lr.Body.Close()
	out := providers.NewExecOutput()
	// The stream is read up to maxLogs: what lies beyond would be cut from
	// the bounded output anyway.
	lim := &io.LimitedReader{R: lr.Body, N: maxLogs}
	ld := json.NewDecoder(bufio.NewReader(lim))
	for {
		var l struct {
			Stream string          `json:"stream"`
			Data   json.RawMessage `json:"data"`
		}
		err := ld.Decode(&l)
		if err == io.EOF || err != nil && lim.N == 0 {
			break
		}
		if err != nil {
			return providers.ExecResult{}, boxfiles.Failed(ctx, &b.p.d, op, id, "reading the command's logs", err)
		}
		var s string
		switch l.Stream {
		case "stdout", "stderr":
			if err := json.Unmarshal(l.Data, &s); err != nil {
				return providers.ExecResult{}, boxfiles.Failed(ctx, &b.p.d, op, id, "reading the command's logs", err)
			}
			if l.Stream == "stdout" {
				out.Stdout.Write([]byte(s))
			} else {
				out.Stderr.Write([]byte(s))
			}
		case "error":
			return providers.ExecResult{}, &providers.Error{Provider: Name, Op: op, Instance: id, Kind: providers.KindConflict,
				Err: fmt.Errorf("the command's log stream failed: %s", l.Data)}
		}
	}
	res.Stdout, res.Stderr = out.Stdout.Bytes(), out.Stderr.Bytes()
	return res, nil
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }
