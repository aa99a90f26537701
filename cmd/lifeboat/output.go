package main

import (
	"encoding/json"
	"fmt"
	"io"
)

// printer writes command output: text for people, or JSON lines (each with
// a message_type, see docs/json.md) under --json.
type printer struct {
	w, errw io.Writer
	json    bool
}

// emit prints v as one JSON line under --json, or calls text otherwise.
// v must carry a MessageType field.
func (p *printer) emit(v any, text func(w io.Writer)) {
	if p.json {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err) // message structs always marshal
		}
		fmt.Fprintf(p.w, "%s\n", b)
		return
	}
	text(p.w)
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
