package ssh

import (
	"bufio"
	"context"
	"errors"
	"io"
	"regexp"
	"strings"

	"golang.org/x/crypto/ssh"

	"lifeboat/providers"
)

// maxStderr bounds what is kept of a helper command's stderr.
const maxStderr = 64 << 10

// run runs script under sh on the host (not the instance: no cd, no
// instance check), with stdin and stdout as given (stdout nil: kept up to
// maxStderr and dropped). A non-zero exit is a result; a session that
// ended without an exit status, or a cancelled ctx, is an error.
func (c *conn) run(ctx context.Context, script string, stdin io.Reader, stdout io.Writer) (exit int, stderr string, err error) {
	s, err := c.ssh.NewSession()
	if err != nil {
		return -1, "", ctxErr(ctx, err)
	}
	defer s.Close()
	errb := providers.BoundedBuffer{Max: maxStderr}
	if stdout == nil {
		stdout = &providers.BoundedBuffer{Max: maxStderr}
	}
	s.Stdin, s.Stdout, s.Stderr = stdin, stdout, &errb
	err = s.Run("exec sh -c " + shQuote("LC_ALL=C; export LC_ALL\n"+script))
	var ee *ssh.ExitError
	if errors.As(err, &ee) && ee.Signal() == "" {
		return ee.ExitStatus(), string(errb.Bytes()), nil
	}
	if err != nil {
		return -1, string(errb.Bytes()), ctxErr(ctx, err)
	}
	return 0, string(errb.Bytes()), nil
}

// runParse is run with stdout read by parse as it arrives, so a large
// answer is never held whole. Whatever parse leaves unread is drained.
func (c *conn) runParse(ctx context.Context, script string, parse func(*bufio.Reader) error) (exit int, stderr string, err error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		perr := parse(bufio.NewReaderSize(pr, 64<<10))
		_, _ = io.Copy(io.Discard, pr)
		done <- perr
	}()
	exit, stderr, err = c.run(ctx, script, nil, pw)
	pw.Close()
	if perr := <-done; err == nil && exit == 0 {
		err = perr
	}
	return exit, stderr, err
}

// deniedLine finds the path a tool named in a "Permission denied" or
// "Operation not permitted" line of its stderr, as GNU tools print them:
// "tar: a/b: Cannot open: Permission denied", "getfattr: a/b: Permission
// denied", "find: 'a/b': Permission denied".
var deniedLine = regexp.MustCompile(`(?m)^[a-z]+: '?(.+?)'?: (?:Cannot [^:\n]+: )?(?:Permission denied|Operation not permitted)$`)

// deniedPath returns the path stderr says was refused, relative to the
// directory the tool ran in ("" when it says none).
func deniedPath(stderr string) string {
	m := deniedLine.FindStringSubmatch(stderr)
	if m == nil {
		return ""
	}
	return strings.TrimPrefix(m[1], "./")
}

// firstLine is the first line of a tool's stderr, for messages.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
