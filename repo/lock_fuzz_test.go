package repo

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
)

// FuzzDecodeLock: lock objects come from storage, written by any process
// (and any lifeboat version) that shares the repository. Any bytes either
// decode into a lock of version 1 with a known mode, which encodes again
// to the same bytes after one round, or are refused; never a panic. A
// decoded lock can be described and compared with a locker's own lock
// whatever it holds, and one whose mode does not conflict never blocks.
func FuzzDecodeLock(f *testing.F) {
	now := time.Date(2026, 11, 29, 21, 50, 0, 0, time.UTC)
	for _, l := range []LockInfo{
		{Version: 1, Mode: LockExclusive, Owner: "9f1c2a7be04d8e31", Host: "vm", PID: 4242, Command: "prune", Time: now, Refreshed: now},
		{Version: 1, Mode: LockExclusive, Owner: "4b0e77d1c2a9f356", Host: "vm", PID: 4343, Time: now, Refreshed: now, Waiting: true},
		{Version: 1, Mode: LockShared, Owner: "o", Host: "h", PID: -1},
	} {
		b, err := json.Marshal(l)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte(`{"version":2,"mode":"shared"}`))
	f.Add([]byte(`{"version":1,"mode":"reader"}`))
	f.Add([]byte(`{"version":1,"mode":"prune","future_field":[1,2,3],"refreshed":"9999-12-31T23:59:59+14:00"}`))
	f.Add([]byte(`not json`))
	mine := []LockInfo{
		{Mode: LockShared, Owner: "me"},
		{Mode: LockPrune, Owner: "me"},
		{Mode: LockExclusive, Owner: "me", Time: now},
		{Mode: LockExclusive, Owner: "me", Time: now, Waiting: true},
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		info, err := decodeLock(data)
		if err != nil {
			if info != (LockInfo{}) {
				t.Fatalf("refused lock came with %+v", info)
			}
			return
		}
		if info.Version != 1 || !info.Mode.valid() {
			t.Fatalf("accepted version %d, mode %q", info.Version, info.Mode)
		}
		enc, err := json.Marshal(info)
		if err != nil {
			t.Fatalf("a decoded lock does not encode: %v", err)
		}
		again, err := decodeLock(enc)
		if err != nil {
			t.Fatalf("a decoded lock, encoded again, is refused: %v\n%s", err, enc)
		}
		if enc2, _ := json.Marshal(again); !bytes.Equal(enc, enc2) {
			t.Fatalf("encodings differ:\n%s\n%s", enc, enc2)
		}
		_ = info.String()
		for _, me := range mine {
			for _, holds := range []bool{false, true} {
				if me.blockedBy(info, holds) && (!me.Mode.conflicts(info.Mode) || info.Owner == me.Owner) {
					t.Fatalf("%s lock of %q blocked by %+v", me.Mode, me.Owner, info)
				}
			}
		}
	})
}
