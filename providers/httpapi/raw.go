package httpapi

import (
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"time"

	"lifeboat/providers"
)

// Request is one request for Send whose body is not JSON (a file upload,
// a streamed RPC), to a URL that need not be under Client.BaseURL (a
// sandbox's own host).
type Request struct {
	Op       string
	Instance providers.InstanceID
	Method   string
	URL      string      // absolute
	Header   http.Header // added to the Client's headers
	Body     io.Reader   // sent as it is; nil for none
	Pass     []int       // statuses returned to the caller with a nil error
	// What names the request in errors instead of its URL (which may carry
	// a sandbox host or a query the caller would rather not print).
	What string
}

// Send sends r and returns the response, whose body the caller reads and
// closes, for a 2xx status or one in r.Pass (a 404 or 410 only with the
// platform's JSON body, as for Do). Every other status is an
// *providers.Error through c.Table (Retry-After parsed for a rate limit),
// and a transport failure or a timeout is KindUnavailable, as for Do.
func (c *Client) Send(ctx context.Context, r Request) (*http.Response, error) {
	what := r.What
	if what == "" {
		what = r.Method + " " + r.URL
	}
	req, err := c.newRequest(ctx, r.Method, r.URL, r.Header, r.Body)
	if err != nil {
		return nil, c.fail(r.Op, r.Instance, providers.KindInvalid, "", fmt.Errorf("%s: %w", what, err))
	}
	resp, _, err := c.send(ctx, r.Op, r.Instance, what, req, r.Pass)
	return resp, err
}

// StatusError is the *providers.Error for a non-2xx answer: its kind from
// c.Table, the status as Code, the start of the body as the message, and
// for a rate limit the Retry-After the platform sent.
func (c *Client) StatusError(op string, id providers.InstanceID, what string, resp *http.Response, now time.Time) error {
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	e := &providers.Error{Provider: c.Provider, Op: op, Instance: id, Kind: c.Table.Kind(resp.StatusCode), Code: strconv.Itoa(resp.StatusCode),
		Err: fmt.Errorf("%s: %s", what, strings.TrimSpace(string(msg)))}
	if e.Kind == providers.KindRateLimited {
		e.RetryAfter = ParseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	return e
}

// MultipartFile streams r as the one file of a multipart/form-data body,
// in the form field field with file name name (the upload shape of E2B's
// envd and Daytona's toolbox). The returned body must be closed by the
// caller once the request is done (that stops the writer if the request
// ended early); contentType is the Content-Type header to send with it.
func MultipartFile(field, name string, r io.Reader) (body *io.PipeReader, contentType string) {
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		fw, err := mw.CreateFormFile(field, name)
		if err == nil {
			_, err = io.Copy(fw, r)
		}
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	return pr, mw.FormDataContentType()
}
