package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"lifeboat/internal/s3test"
)

// runAt runs lifeboat in-process with the repository given by --repo, or
// by LIFEBOAT_REPO when viaEnv is set, and fails t when the output holds
// any of secrets.
func (e *env) runAt(loc string, viaEnv bool, secrets []string, args ...string) result {
	e.t.Helper()
	full := []string{"--cache-dir", e.cache, "--password-file", e.passwdFile}
	if viaEnv {
		e.t.Setenv("LIFEBOAT_REPO", loc)
	} else {
		full = append(full, "--repo", loc)
	}
	var out, errb strings.Builder
	code := run(context.Background(), append(full, args...), strings.NewReader(""), &out, &errb)
	e.t.Setenv("LIFEBOAT_REPO", "")
	for _, s := range secrets {
		if strings.Contains(out.String(), s) || strings.Contains(errb.String(), s) {
			e.t.Fatalf("lifeboat %v at a location given by %s repeated %q:\nstdout: %s\nstderr: %s", args, map[bool]string{true: "LIFEBOAT_REPO", false: "--repo"}[viaEnv], s, out.String(), errb.String())
		}
	}
	return result{code, out.String(), errb.String()}
}

// TestS3LocationMistakes: credentials in an s3: location, a bad scheme and
// missing S3 credentials are mistakes in how the repository is named:
// every command, init too, exits 10 with a message that says the mistake
// and what to do, not that there is no repository to init; and nothing
// printed (text or JSON) repeats what was before the @.
func TestS3LocationMistakes(t *testing.T) {
	e := newEnv(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	for _, tc := range []struct {
		name, loc string
		secrets   []string
		want      string
	}{
		{"credentials", "s3:https://AKIAEXAMPLE:verysecret@127.0.0.1:39900/lifeboat/fleet", []string{"AKIAEXAMPLE", "verysecret"}, "credentials do not belong in the location"},
		{"credentials without //", "s3:AKIAEXAMPLE:verysecret@127.0.0.1:39900/lifeboat/fleet", []string{"AKIAEXAMPLE", "verysecret"}, "credentials do not belong in the location"},
		{"secret with a slash", "s3:https://AKIAEXAMPLE:very/secret@127.0.0.1:39900/lifeboat/fleet", []string{"AKIAEXAMPLE", "very", "secret@"}, "credentials do not belong in the location"},
		{"bad scheme", "s3:ftp://127.0.0.1:39900/lifeboat/fleet", nil, `scheme "ftp"`},
		{"no credentials", "s3:http://127.0.0.1:39900/lifeboat/fleet", nil, "no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e.t = t
			for _, viaEnv := range []bool{false, true} {
				for _, args := range [][]string{{"snapshots"}, {"snapshots", "--json"}, {"init", "--kdf-memory-kib", "64", "--kdf-time", "1"}, {"key", "list"}} {
					r := e.runAt(tc.loc, viaEnv, tc.secrets, args...)
					if r.code != exitNoRepo {
						t.Fatalf("lifeboat %v: exit %d, want %d\n%s", args, r.code, exitNoRepo, r.stderr)
					}
					msg := r.stderr
					if args[len(args)-1] == "--json" {
						lines := jsonLines(t, r.stderr)
						if len(lines) != 1 || lines[0]["message_type"] != "exit_error" || lines[0]["code"] != float64(exitNoRepo) {
							t.Fatalf("lifeboat %v: %q, want one exit_error line with code %d", args, r.stderr, exitNoRepo)
						}
						msg = lines[0]["message"].(string)
					}
					if !strings.Contains(msg, tc.want) || strings.Contains(msg, "lifeboat init") || strings.Contains(msg, "no repository found") {
						t.Fatalf("lifeboat %v: %q, want a message with %q and no advice to init", args, msg, tc.want)
					}
				}
			}
		})
	}
}

// refusingProxy is a reverse proxy in front of srv that answers every PUT
// whose path holds refused with 403 AccessDenied, as a bucket policy
// refusing uploads there would.
func refusingProxy(t *testing.T, srv *s3test.Server, refused string) string {
	t.Helper()
	target, err := url.Parse(srv.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(target) // keeps the signed Host
	p := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || !strings.Contains(r.URL.Path, refused) {
			rp.ServeHTTP(w, r)
			return
		}
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusForbidden)
		fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>AccessDenied</Code><Message>Access Denied.</Message><Resource>%s</Resource><RequestId>refusing-proxy</RequestId></Error>`, r.URL.Path)
	}))
	t.Cleanup(p.Close)
	return p.URL
}

// TestS3RefusalsExitNoAccess: an access key id the server does not know
// (versitygw answers 404 XAdminUserNotFound) is a refusal, exit 22 naming
// the code and the access key id, for init and other commands, with and
// without a region; a 403 to the upload of a pack during a capture is
// exit 22 too, not 1.
func TestS3RefusalsExitNoAccess(t *testing.T) {
	srv := s3test.Start(t)
	e := newEnv(t)
	for _, kv := range srv.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	secrets := []string{srv.SecretKey}

	loc := srv.Location(srv.NewBucket(t), "repo")
	t.Setenv("AWS_ACCESS_KEY_ID", "NOSUCHKEYID")
	for _, region := range []string{"", "us-east-1"} {
		t.Setenv("AWS_REGION", region)
		for _, args := range [][]string{{"snapshots"}, {"init", "--kdf-memory-kib", "64", "--kdf-time", "1"}} {
			r := e.runAt(loc, false, secrets, args...)
			if r.code != exitNoAccess || !strings.Contains(r.stderr, "XAdminUserNotFound") || !strings.Contains(r.stderr, "access key id") ||
				strings.Contains(r.stderr, "lifeboat init") || strings.Contains(r.stderr, "file not found") {
				t.Fatalf("lifeboat %v with an unknown access key id (region %q): exit %d, want %d naming XAdminUserNotFound and the access key id\n%s", args, region, r.code, exitNoAccess, r.stderr)
			}
		}
	}
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_REGION", "")

	loc = "s3:" + refusingProxy(t, srv, "/data/") + "/" + srv.NewBucket(t) + "/repo"
	if r := e.runAt(loc, false, secrets, "init", "--kdf-memory-kib", "64", "--kdf-time", "1"); r.code != 0 {
		t.Fatalf("init through the proxy: exit %d\n%s", r.code, r.stderr)
	}
	src := filepath.Join(e.dir, "src")
	writeTree(t, src, 3)
	r := e.runAt(loc, false, secrets, "capture", "--workspace", "w1", src)
	if r.code != exitNoAccess || !strings.Contains(r.stderr, "403 AccessDenied") || !strings.Contains(r.stderr, "save data/") {
		t.Fatalf("capture whose pack uploads are refused: exit %d, want %d naming 403 AccessDenied\n%s", r.code, exitNoAccess, r.stderr)
	}
}
