package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
)

// printer writes command output: text for people, or JSON lines (each with
// a message_type, see docs/json.md) under --json.
type printer struct {
	w, errw io.Writer
	json    bool
	// err is the first message that could not be written as JSON; the
	// command then fails with it (run).
	err error
}

// emit prints v as one JSON line under --json, or calls text otherwise.
// v must carry a MessageType field. A message that does not encode (a
// value read from storage that Go decodes but cannot encode, which the
// decoders refuse) is left out and fails the command, never panics.
func (p *printer) emit(v any, text func(w io.Writer)) {
	if p.json {
		b, err := json.Marshal(v)
		if err != nil {
			if p.err == nil {
				p.err = fmt.Errorf("a %s message cannot be written as JSON (%w); it holds a value read from storage that cannot be written back: run `lifeboat check`, or use the text output",
					messageType(v), err)
			}
			return
		}
		fmt.Fprintf(p.w, "%s\n", b)
		return
	}
	text(p.w)
}

// messageType is v's MessageType field, for messages about v.
func messageType(v any) string {
	rv := reflect.Indirect(reflect.ValueOf(v))
	if rv.Kind() == reflect.Struct {
		if f := rv.FieldByName("MessageType"); f.IsValid() && f.Kind() == reflect.String {
			return fmt.Sprintf("%q", f.String())
		}
	}
	return fmt.Sprintf("%T", v)
}

// count is n and noun, the noun in the plural unless n is 1 ("1 pack",
// "3 packs"); for text output only, never for JSON.
func count[N ~int | ~int64 | ~uint64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// note prints an informational line to stderr in text mode only.
func (p *printer) note(format string, args ...any) {
	if !p.json {
		fmt.Fprintf(p.errw, format+"\n", args...)
	}
}

type exitErrorMessage struct {
	MessageType string `json:"message_type"` // "exit_error"
	Code        int    `json:"code"`
	Message     string `json:"message"`
}

// exitError reports the error that ends the command, on stderr.
func (p *printer) exitError(err error, code int) {
	if p.json {
		b, _ := json.Marshal(exitErrorMessage{MessageType: "exit_error", Code: code, Message: err.Error()})
		fmt.Fprintf(p.errw, "%s\n", b)
		return
	}
	fmt.Fprintf(p.errw, "lifeboat: %v\n", err)
}
