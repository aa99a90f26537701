package blob

import (
	"fmt"
	"time"
)

// CheckTime returns an error when t, a time decoded from stored or
// received bytes, cannot be written back: Go's RFC 3339 parser accepts
// times its encoder refuses (an offset of 24 hours or more, such as
// +24:00; a year outside 0 to 9999, also one that gets there only in UTC,
// such as 9999-12-31T23:00:00-05:00). An object holding one could be read
// but not listed as JSON, saved again, or compared in UTC; decoders refuse
// it with this error, which names what the time is for.
func CheckTime(what string, t time.Time) error {
	for _, u := range []time.Time{t, t.UTC()} {
		if _, err := u.MarshalText(); err != nil {
			return fmt.Errorf("%s %s cannot be written back (%v): a stored time has an offset under 24 hours and a year from 0 to 9999",
				what, t.Format(time.RFC3339Nano), err)
		}
	}
	return nil
}
