package main

import (
	"testing"

	"lifeboat/recovery"
)

// A server's receipt carries its error as text; the error emitReceipt
// returns gives the outcome's exit code and says the text once.
func TestServerReceiptErrorSaysItOnce(t *testing.T) {
	for _, c := range []struct {
		outcome recovery.Outcome
		text    string
		code    int
		want    string
	}{
		{recovery.QuiesceTimeout, "cannot quiesce the workspace in time: pausing agent: context canceled", exitQuiesce,
			"cannot quiesce the workspace in time: pausing agent: context canceled"},
		{recovery.QuiesceTimeout, "pausing agent: context canceled", exitQuiesce,
			"cannot quiesce the workspace in time: pausing agent: context canceled"},
		{recovery.Refused, "workspace instance is lost: the provider confirmed instance bot1 of bot1 missing", exitRecovering,
			"workspace instance is lost: the provider confirmed instance bot1 of bot1 missing"},
	} {
		err := receiptExitError(recovery.Receipt{Workspace: "bot1", Outcome: c.outcome, Error: c.text})
		if got := exitCode(err); got != c.code || err.Error() != c.want {
			t.Errorf("%s %q: exit %d, %q; want %d, %q", c.outcome, c.text, got, err, c.code, c.want)
		}
	}
}
