package boxfiles

import (
	"context"
	"io"
	"os"
	"strings"
	"testing"

	"lifeboat/providers"
)

// endlessBox is a sandbox whose commands all succeed and whose downloads
// of the named file never end (Lifeboat's listing or archive replaced by
// a link to /dev/zero); other downloads give listing.
type endlessBox struct {
	endless string // the prefix of the temp file name that never ends
	listing string
}

func (b endlessBox) Upload(context.Context, providers.InstanceID, string, io.Reader, int64) error {
	return nil
}

func (b endlessBox) Download(_ context.Context, _ providers.InstanceID, p string, w io.Writer) error {
	if strings.Contains(p, "/"+b.endless+"-") {
		_, err := io.Copy(w, zeros{})
		return &providers.Error{Provider: "fake", Op: "download", Kind: providers.KindUnavailable, Err: err}
	}
	_, err := io.WriteString(w, b.listing)
	return err
}

func (b endlessBox) Run(context.Context, providers.InstanceID, string, []string) (providers.ExecResult, error) {
	return providers.ExecResult{}, nil
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// TestReadFilesBoundsDownloads: a sandbox that answers the listing or the
// archive with an endless stream makes ReadFiles fail with a message
// saying what was too large, instead of filling memory or the disk; no
// download is left in the cache directory.
func TestReadFilesBoundsDownloads(t *testing.T) {
	defer func(l int64) { maxListing = l }(maxListing)
	maxListing = 1 << 20
	for _, c := range []struct {
		endless, want string
	}{
		{"list", "the workspace listing"},
		{"read", "the archive of the workspace"},
	} {
		t.Run(c.endless, func(t *testing.T) {
			cache := t.TempDir()
			f := &Files{Provider: "fake", Layout: Layout{Workspace: "/w/ws"}, CacheDir: cache,
				Box: endlessBox{endless: c.endless, listing: "now 1700000000\x00f 5 1600000000.0 644 1:2 1 a\x00"}}
			_, err := f.ReadFiles(context.Background(), "sb1")
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "larger than") {
				t.Fatalf("ReadFiles = %v, want a refusal naming %s as too large", err, c.want)
			}
			if providers.KindOf(err) == "" {
				t.Fatalf("ReadFiles = %v, not a *providers.Error", err)
			}
			ents, _ := os.ReadDir(cache)
			for _, e := range ents {
				if strings.HasPrefix(e.Name(), ".download") {
					t.Fatalf("the download %s was left in the cache", e.Name())
				}
			}
		})
	}
}
