package s3

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/minio/minio-go/v7"
)

// lookupRegion asks the server for the bucket's region (GET
// /BUCKET/?location), trying as often as any other request and with the
// same waits. minio-go asks it before the first request on a client
// without a region, but only once: a connection broken at that moment
// would fail the command. The answer stays in minio-go's cache for the
// client's life, so no later request asks again. A bucket that does not
// exist is no error here: BucketExists says so.
func (b *Backend) lookupRegion(ctx context.Context) error {
	for try := 1; ; try++ {
		_, err := b.client.GetBucketLocation(ctx, b.loc.Bucket)
		resp := minio.ToErrorResponse(err)
		switch {
		case err == nil, resp.Code == "NoSuchBucket":
			return nil
		case try >= b.tries || ctx.Err() != nil || !retried(resp, err):
			return err
		}
		select {
		case <-time.After(retryWait(try)):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// retryWait is minio-go's wait after try: 200 ms doubling with each try,
// at most 1 s, less up to all of it at random (full jitter).
func retryWait(try int) time.Duration {
	d := min(minio.DefaultRetryCap, minio.DefaultRetryUnit<<(try-1))
	return d - time.Duration(rand.Float64()*float64(d))
}
