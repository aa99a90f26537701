package boxfiles

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	"lifeboat/providers"
	"lifeboat/providers/httpapi"
)

// Stream sends a data-plane request with a raw body to path under c's
// base URL (httpapi.Client.Send); a 2xx answer is returned for the caller
// to read and close.
func Stream(ctx context.Context, c *httpapi.Client, op string, id providers.InstanceID, method, path string, hdr http.Header, body io.Reader) (*http.Response, error) {
	return c.Send(ctx, httpapi.Request{Op: op, Instance: id, Method: method, URL: strings.TrimSuffix(c.BaseURL, "/") + path,
		Header: hdr, Body: body, What: method + " " + strings.SplitN(path, "?", 2)[0]})
}

// Upload sends a file's bytes (body) for a Box's Upload (op "upload")
// through Stream; the answer's body is not read.
func Upload(ctx context.Context, c *httpapi.Client, id providers.InstanceID, method, path string, hdr http.Header, body io.Reader) error {
	resp, err := Stream(ctx, c, "upload", id, method, path, hdr, body)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// Download copies the answer's body to w for a Box's Download (op
// "download") of the file name through Stream; a failure while reading it
// is Failed, "reading <name>".
func Download(ctx context.Context, c *httpapi.Client, id providers.InstanceID, method, path string, hdr http.Header, body io.Reader, w io.Writer, name string) error {
	resp, err := Stream(ctx, c, "download", id, method, path, hdr, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return Failed(ctx, c, "download", id, "reading "+name, err)
	}
	return nil
}

// Failed is the error for a failure while reading a 2xx answer's body:
// KindUnavailable, wrapping the context's error when it ended.
func Failed(ctx context.Context, c *httpapi.Client, op string, id providers.InstanceID, what string, err error) error {
	code := "transport"
	if ctx.Err() != nil {
		code, err = "context", ctx.Err()
	}
	return &providers.Error{Provider: c.Provider, Op: op, Instance: id, Kind: providers.KindUnavailable, Code: code, Err: fmt.Errorf("%s: %w", what, err)}
}
