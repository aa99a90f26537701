package httpapi

import (
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"lifeboat/providers"
)

// notPlatform is the error for a 404 or 410 a caller would take as
// "gone" (Inspect's Missing, Destroy's already gone) whose body is not
// the platform's JSON error (by its content type, or a body that is a JSON
// object): a proxy's or a wrong base URL's page proves
// nothing about the instance, so it is KindUnavailable. nil when resp is
// not such an answer.
func (c *Client) notPlatform(op string, id providers.InstanceID, what string, resp *http.Response) error {
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusGone {
		return nil
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "application/json" || strings.HasSuffix(mt, "+json") {
		return nil
	}
	// A JSON object under another content type is the platform's too; the
	// body read to see it is put back for the caller.
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if bytes.HasPrefix(bytes.TrimSpace(msg), []byte("{")) {
		resp.Body = readCloser{io.MultiReader(bytes.NewReader(msg), resp.Body), resp.Body}
		return nil
	}
	return &providers.Error{Provider: c.Provider, Op: op, Instance: id, Kind: providers.KindUnavailable, Code: strconv.Itoa(resp.StatusCode),
		Err: fmt.Errorf("%s: answered %d with %q, not the platform's JSON error (a proxy, or a wrong base_url?); not taken as proof the instance is gone: %s",
			what, resp.StatusCode, resp.Header.Get("Content-Type"), strings.TrimSpace(string(msg)))}
}

type readCloser struct {
	io.Reader
	io.Closer
}
