package httpapi

import (
	"context"
	"errors"
	"net/http"

	"lifeboat/providers"
)

// GetInstance is the request behind an adapter's Inspect (op "inspect"):
// an empty id is KindInvalid ("empty sandbox id"); otherwise it is Do of
// GET path, decoding into out, with the statuses in pass (the ones Inspect
// reads as Missing) returned with a nil error.
func (c *Client) GetInstance(ctx context.Context, id providers.InstanceID, path string, out any, pass ...int) (int, error) {
	const op = "inspect"
	if id == "" {
		return 0, &providers.Error{Provider: c.Provider, Op: op, Kind: providers.KindInvalid, Err: errors.New("empty sandbox id")}
	}
	return c.Do(ctx, op, id, http.MethodGet, path, nil, out, pass...)
}
