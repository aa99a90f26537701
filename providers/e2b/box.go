package e2b

import (
	"context"
	"io"

	"lifeboat/providers"
	"lifeboat/providers/boxfiles"
)

// box is envd for boxfiles: each call looks the sandbox up on the control
// plane (for its envd access token and domain) and then talks to envd.
type box struct{ p *Provider }

var _ boxfiles.Box = box{}

// Upload implements boxfiles.Box: POST /files (multipart, field "file").
func (b box) Upload(ctx context.Context, id providers.InstanceID, p string, r io.Reader, _ int64) error {
	e, err := b.p.envd(ctx, "upload", id)
	if err != nil {
		return err
	}
	return e.upload(ctx, "upload", p, r)
}

// Download implements boxfiles.Box: GET /files.
func (b box) Download(ctx context.Context, id providers.InstanceID, p string, w io.Writer) error {
	e, err := b.p.envd(ctx, "download", id)
	if err != nil {
		return err
	}
	body, err := e.download(ctx, "download", p)
	if err != nil {
		return err
	}
	defer body.Close()
	if _, err := io.Copy(w, body); err != nil {
		return boxfiles.Failed(ctx, &b.p.data, "download", id, "reading "+p, err)
	}
	return nil
}

// Run implements boxfiles.Box: process.Process/Start with dir as the
// working directory.
func (b box) Run(ctx context.Context, id providers.InstanceID, dir string, argv []string) (providers.ExecResult, error) {
	e, err := b.p.envd(ctx, "exec", id)
	if err != nil {
		return providers.ExecResult{}, err
	}
	return e.run(ctx, "exec", dir, argv)
}
