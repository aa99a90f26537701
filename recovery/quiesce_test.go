package recovery

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestExecWriterErrors: a hook command that fails is reported with the
// end of its output, redacted; one that outlives the hook's own timeout
// says so and what helps.
func TestExecWriterErrors(t *testing.T) {
	e := newREnv(t, botFiles)
	w, err := e.store.Workspace("bot1")
	if err != nil {
		t.Fatal(err)
	}
	fail := ExecWriter{Label: "fail", PauseCommand: []string{"sh", "-c", "echo starting; echo 'cannot reach agent: token secret-42' >&2; exit 7"},
		Redact: RedactPatterns(regexp.MustCompile(`secret-[0-9]+`))}
	err = fail.Pause(e.ctx, w, e.p)
	if want := `"sh" exited with 7; its output ends: cannot reach agent: token [REDACTED]`; err == nil || err.Error() != want {
		t.Fatalf("failing hook: %v, want %s", err, want)
	}
	// A secret that the cut to the output's end splits is still redacted:
	// its last digits begin the kept end.
	keep := strings.Repeat("y", hookOutputBytes-4)
	split := ExecWriter{Label: "split", PauseCommand: []string{"sh", "-c", "printf 'token secret-98765432%s' " + keep + " >&2; exit 7"},
		Redact: RedactPatterns(regexp.MustCompile(`secret-[0-9]+`))}
	if err := split.Pause(e.ctx, w, e.p); err == nil || strings.Contains(err.Error(), "5432") || !strings.Contains(err.Error(), keep[:100]) {
		t.Fatalf("a secret split by the cut: %v", err)
	}
	hang := ExecWriter{Label: "hang", PauseCommand: []string{"sleep", "60"}, Timeout: 20 * time.Millisecond}
	err = hang.Pause(e.ctx, w, e.p)
	if err == nil || !strings.Contains(err.Error(), `"sleep" did not finish within the hook's own timeout of 20ms; raise the hook's timeout or fix the hook`) {
		t.Fatalf("hook past its timeout: %v", err)
	}
}

// TestRegisteredExecWriterRedacts: an ExecWriter registered without its
// own Redact gets the lifecycle's, and a capture's failure names the hook
// once.
func TestRegisteredExecWriterRedacts(t *testing.T) {
	e := newREnv(t, botFiles)
	e.close()
	e.redact = RedactPatterns(regexp.MustCompile(`secret-[0-9]+`))
	e.open()
	e.lc.RegisterWriter("bot1", ExecWriter{Label: "fail", PauseCommand: []string{"sh", "-c", "echo secret-42 >&2; exit 7"}})
	r := e.lc.Capture(e.ctx, "bot1", ReasonManual)
	if r.Outcome != Failed || !strings.Contains(r.Error, `pausing fail: "sh" exited with 7; its output ends: [REDACTED]`) {
		t.Fatalf("capture with a failing hook: %+v", r)
	}
}
