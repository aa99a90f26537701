package server

import (
	"bufio"
	"bytes"
	"errors"
	"strings"
	"testing"
)

// FuzzParseTokens: the token file parser never panics; a file it accepts
// has one entry per token line, each with a role, a label without white
// space and a hash no other line has; a file it refuses gets an
// ErrBadTokenFile error that never repeats a long word of the file (a
// token pasted in by mistake stays out of the log).
//
//	go test ./server -run '^$' -fuzz FuzzParseTokens -fuzztime 5m
func FuzzParseTokens(f *testing.F) {
	for _, s := range []string{
		"# comment\n\nuser " + HashToken("a") + " inbox\noperator " + HashToken("b") + "\n",
		"operator " + HashToken("b") + " alice extra\n",
		"user " + HashToken("a") + "\nuser " + HashToken("a") + "\n",
		"s3cr3t-token-pasted-here " + HashToken("a") + "\n",
		"user sha256:" + strings.Repeat("g", 64) + "\n",
		"\r\nuser\t" + HashToken("c") + "\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := ParseTokens("fuzz", b)
		if err != nil {
			if !errors.Is(err, ErrBadTokenFile) || tk != nil {
				t.Fatalf("error %v with %v", err, tk)
			}
			for _, w := range bytes.Fields(b) {
				if len(w) > 16 && strings.Contains(err.Error(), string(w)) {
					t.Fatalf("the error repeats %q of the file: %v", w, err)
				}
			}
			return
		}
		lines := 0
		sc := bufio.NewScanner(bytes.NewReader(b))
		for sc.Scan() {
			if l := strings.TrimSpace(sc.Text()); l != "" && !strings.HasPrefix(l, "#") {
				lines++
			}
		}
		if len(tk.list) == 0 || len(tk.list) != lines {
			t.Fatalf("%d entries for %d token lines", len(tk.list), lines)
		}
		seen := map[[32]byte]bool{}
		for _, e := range tk.list {
			if e.role != RoleUser && e.role != RoleOperator || e.label == "" || strings.ContainsFunc(e.label, func(r rune) bool { return r == ' ' || r == '\t' || r == '\n' }) || seen[e.hash] {
				t.Fatalf("entry %+v", e)
			}
			seen[e.hash] = true
		}
	})
}
