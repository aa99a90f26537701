package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// doRaw sends body as it is.
func (e *env) doRaw(method, path, tok, body string, header ...string) (int, apiError) {
	e.t.Helper()
	code, b, _ := e.send(method, path, tok, strings.NewReader(body), header...)
	var ae apiError
	_ = json.Unmarshal(b, &ae)
	return code, ae
}

// TestTrailingJSONRefused: a body with anything but white space after its
// JSON object (garbage, a second object, a stray bracket) is refused with
// 400 bad_request and changes nothing; white space after it is fine; a
// body over 64 KiB is refused whatever it holds after the object.
func TestTrailingJSONRefused(t *testing.T) {
	t.Parallel()
	e := newLostEnv(t)
	reg := `{"id": "a", "provider": "local", "instance": "inst-a"}`
	for _, body := range []string{
		reg + " x",
		reg + `{"id": "b", "provider": "local"}`,
		reg + "\n" + reg,
		reg + "]",
		reg + " null",
		reg + strings.Repeat(" ", maxBody),
	} {
		code, ae := e.doRaw("POST", "/v1/workspaces", userToken, body)
		if code != http.StatusBadRequest || ae.Code != "bad_request" {
			t.Errorf("%.80q: %d %+v", body, code, ae)
		}
	}
	for _, body := range []string{`{"checkpoint": "cp-good"} {"checkpoint": "cp-other"}`, `{"checkpoint": "cp-good"}garbage`} {
		if code, ae := e.doRaw("POST", "/v1/workspaces/w1/recovery/approve", userToken, body, "Idempotency-Key", "k"); code != http.StatusBadRequest ||
			ae.Code != "bad_request" || !strings.Contains(ae.Message, "exactly one JSON object") {
			t.Errorf("approve %q: %d %+v", body, code, ae)
		}
	}
	e.rec.mu.Lock()
	approvals := e.rec.approvals
	e.rec.mu.Unlock()
	var list []workspaceView
	e.ok(http.StatusOK, "GET", "/v1/workspaces", userToken, nil, &list)
	if len(list) != 1 || approvals != 0 {
		t.Fatalf("a refused body changed something: %d workspaces, %d approvals", len(list), approvals)
	}
	if code, ae := e.doRaw("POST", "/v1/workspaces", userToken, reg+" \n\t\r\n"); code != http.StatusCreated {
		t.Fatalf("trailing white space: %d %+v", code, ae)
	}
}

// requestTypes are the JSON bodies the API decodes, each made fresh.
var requestTypes = map[string]func() any{
	"addWorkspace":    func() any { return new(addWorkspaceRequest) },
	"changeWorkspace": func() any { return new(changeWorkspaceRequest) },
	"registerProcess": func() any { return new(registerProcessRequest) },
	"processExit":     func() any { return new(processExitRequest) },
	"approve":         func() any { return new(approveRequest) },
	"resolve":         func() any { return new(resolveRequest) },
}

// decodeBody runs decode on body as a request body.
func decodeBody(body []byte, v any) error {
	return decode(httptest.NewRequest("POST", "/", bytes.NewReader(body)), v)
}

// FuzzDecodeRequests: decode of every request body type never panics,
// and what it accepts is one JSON value with nothing but white space
// after it, at most 64 KiB, whose re-encoding decodes again to the same.
//
//	go test ./server -run '^$' -fuzz FuzzDecodeRequests -fuzztime 5m
func FuzzDecodeRequests(f *testing.F) {
	for _, s := range []string{`{"id":"bot1","provider":"box1","instance":"i","park_interval":"10m","policy":{"keep_last":3}}`,
		`{"instance":"x","park_interval":"default","policy":null}`, `{"command":["npm","run"],"dir":"/w"}`, `{"exit_code":0}`,
		`{"checkpoint":"cp"}`, `{"outcome":"discarded","evidence":"checked"}`, `{} {}`, `{"checkpoint":"cp"} x`, "{}\n", `null`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for name, mk := range requestTypes {
			v := mk()
			if err := decodeBody(body, v); err != nil {
				if _, ok := err.(*apiError); !ok {
					t.Fatalf("%s: not an API error: %v", name, err)
				}
				continue
			}
			if len(body) > maxBody || !json.Valid(body) {
				t.Fatalf("%s: accepted %q, which is not exactly one JSON value of at most %d bytes", name, body, maxBody)
			}
			again, err := json.Marshal(v)
			if err != nil {
				t.Fatalf("%s: re-encoding %+v: %v", name, v, err)
			}
			w := mk()
			if err := decodeBody(again, w); err != nil {
				t.Fatalf("%s: its own encoding %s is refused: %v", name, again, err)
			}
			if b, _ := json.Marshal(w); !bytes.Equal(b, again) {
				t.Fatalf("%s: %s decodes to %s", name, again, b)
			}
		}
	})
}
