package blob

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

type timeHolder struct {
	T time.Time `json:"t"`
}

// Times Go decodes from JSON but cannot encode, as it is or in UTC, are
// refused naming them; every other decodable time passes.
func TestCheckTime(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in string
		ok bool
	}{
		{`"2026-03-01T10:00:00Z"`, true},
		{`"2026-03-01T10:00:00+23:59"`, true},
		{`"0000-01-01T00:00:00Z"`, true},
		{`"9999-12-31T23:59:59.999999999Z"`, true},
		{`"2026-03-01T10:00:00+24:00"`, false},
		{`"2026-03-01T10:00:00-24:59"`, false},
		{`"9999-12-31T23:00:00-05:00"`, false}, // 10000 in UTC
		{`"0000-01-01T00:30:00+01:00"`, false}, // -1 in UTC
	} {
		var v timeHolder
		if err := json.Unmarshal([]byte(`{"t":`+c.in+`}`), &v); err != nil {
			t.Fatalf("%s does not decode: %v", c.in, err)
		}
		err := CheckTime("set", v.T)
		if (err == nil) != c.ok {
			t.Errorf("CheckTime(%s) = %v, want ok %v", c.in, err, c.ok)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "set ") {
			t.Errorf("the error does not name the time: %v", err)
		}
		if err == nil {
			if _, err := json.Marshal(v); err != nil {
				t.Errorf("a time CheckTime passed does not encode: %v", err)
			}
		}
	}
}
