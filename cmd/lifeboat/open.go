package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"golang.org/x/term"

	"lifeboat/backend"
	"lifeboat/backend/location"
	"lifeboat/backend/s3"
	"lifeboat/config"
	"lifeboat/repo"
)

// openBackend opens the repository location; create makes it for init.
func (g *globalOptions) openBackend(ctx context.Context, create bool) (backend.Backend, error) {
	if g.repo == "" {
		return nil, usageError{"no repository: pass --repo or set LIFEBOAT_REPO"}
	}
	be, err := openLocation(ctx, g.repo, g.cfg, create)
	if err != nil {
		return nil, err
	}
	return withCrashHook(be), nil
}

// openLocation opens (create: prepares for init) the repository at loc,
// with the S3 settings of cfg (nil: the environment's), and maps the
// backends' errors to the repository's: an existing repository,
// permission denied, no repository. A mistake in an S3 location or its
// settings is said as it is, without inviting an init. Messages name loc
// without credentials (s3.Redact).
func openLocation(ctx context.Context, loc string, cfg *config.Config, create bool) (backend.Backend, error) {
	o, err := s3Settings(cfg)
	if err != nil {
		return nil, err
	}
	var be backend.Backend
	if create {
		be, err = location.Create(ctx, loc, o)
	} else {
		be, err = location.Open(ctx, loc, o)
	}
	shown := loc
	if location.IsS3(loc) {
		shown = s3.Redact(loc)
	}
	switch {
	case err == nil:
		return be, nil
	case errors.Is(err, s3.ErrConfig):
		return nil, err
	case errors.Is(err, backend.ErrExists):
		return nil, fmt.Errorf("%w at %s", repo.ErrRepoExists, shown)
	case errors.Is(err, fs.ErrPermission): // the repository may be there: say what refused whom
		return nil, fmt.Errorf("%w: %w", repo.ErrAccessDenied, err)
	case create, errors.Is(err, backend.ErrUnavailable), errors.Is(err, context.Canceled):
		return nil, err
	}
	return nil, fmt.Errorf("%w at %s (create one with `lifeboat init`): %w", repo.ErrNoRepository, shown, err)
}

// s3Settings are the S3 settings of cfg's [repository], or of the
// environment without a config file.
func s3Settings(cfg *config.Config) (location.S3, error) {
	var o location.S3
	if cfg != nil && location.IsS3(cfg.Repository.Location) {
		s := cfg.Repository.S3
		secret, err := cfg.S3SecretAccessKey()
		if err != nil {
			return o, usageError{err.Error()}
		}
		o = location.S3{AccessKeyID: s.AccessKeyID, SecretAccessKey: secret, Region: s.Region,
			Addressing: s3.Addressing(s.Addressing), TempDir: s.TempDir}
	}
	o.FromEnv(os.LookupEnv)
	return o, nil
}

// password returns the repository password from --password-file,
// LIFEBOAT_PASSWORD_FILE, LIFEBOAT_PASSWORD or a terminal prompt (asked
// twice when confirm is set).
func (g *globalOptions) password(prompt string, confirm bool) ([]byte, error) {
	if g.cfg != nil && g.passwordFile == "" {
		p, err := g.cfg.Password()
		if err != nil {
			return nil, usageError{err.Error()}
		}
		return p, nil
	}
	if g.passwordFile != "" {
		return readPasswordFile("password file", g.passwordFile)
	}
	if p := os.Getenv("LIFEBOAT_PASSWORD"); p != "" {
		return []byte(p), nil
	}
	g.prompted = true
	return g.prompt(prompt, confirm, "no password given: set LIFEBOAT_PASSWORD or LIFEBOAT_PASSWORD_FILE, or pass --password-file")
}

// newPassword returns a new password (key add, key passwd) from file
// (--new-password-file), or from a prompt asked twice.
func (g *globalOptions) newPassword(file string) ([]byte, error) {
	if file != "" {
		return readPasswordFile("new-password file (--new-password-file)", file)
	}
	return g.prompt("new password: ", true, "no new password given: pass --new-password-file FILE")
}

// readPasswordFile reads a password from the file at path; what names the
// file in errors ("password file", ...).
func readPasswordFile(what, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{fmt.Sprintf("reading %s: %v", what, err)}
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) == 0 {
		return nil, usageError{fmt.Sprintf("%s is empty: %s", what, path)}
	}
	return b, nil
}

// prompt asks for a password on the terminal, or fails with missing (a
// usage error saying how to give it) when there is none.
func (g *globalOptions) prompt(prompt string, confirm bool, missing string) ([]byte, error) {
	f, ok := g.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, usageError{missing + " (there is no terminal to ask on)"}
	}
	fmt.Fprint(g.out.errw, prompt)
	p, err := term.ReadPassword(int(f.Fd()))
	fmt.Fprintln(g.out.errw)
	if err != nil {
		return nil, fmt.Errorf("reading password: %w", err)
	}
	if len(p) == 0 {
		return nil, usageError{"empty password"}
	}
	if confirm {
		fmt.Fprint(g.out.errw, "enter it again: ")
		again, err := term.ReadPassword(int(f.Fd()))
		fmt.Fprintln(g.out.errw)
		if err != nil {
			return nil, fmt.Errorf("reading password: %w", err)
		}
		if !bytes.Equal(p, again) {
			return nil, usageError{"the passwords do not match"}
		}
	}
	return p, nil
}

// serveSessionShare is how long serve's captures share one refresh of
// the condemned packs and the index (repo.Options.SessionShare): a fleet's
// captures then list the repository once a minute per server, not once
// each.
const serveSessionShare = time.Minute

// repoOptions are the options the repository is opened with. serve keeps
// the snapshot and pin objects it loaded (its retention reads them all at
// every capture) and shares capture sessions.
func (g *globalOptions) repoOptions(withIndex bool) repo.Options {
	o := repo.Options{CacheDir: g.cacheDir, KeyHint: g.keyHint, KeyCache: g.kekCache(), NoIndexDB: !withIndex}
	if g.serving {
		o.KeepObjects, o.SessionShare = true, serveSessionShare
	}
	return o
}

// withRepo opens the repository with the password (withIndex also opens
// and syncs the local index), runs fn, then closes it, keeping fn's error
// first.
func (g *globalOptions) withRepo(ctx context.Context, withIndex bool, fn func(r *repo.Repository) error) error {
	be, err := g.openBackend(ctx, false)
	if err != nil {
		return err
	}
	pw, err := g.password("repository password: ", false)
	if err != nil {
		_ = be.Close()
		return err
	}
	r, err := repo.Open(ctx, be, pw, g.repoOptions(withIndex))
	clear(pw)
	if err != nil {
		_ = be.Close()
		return err
	}
	if tc, ok := backend.As[backend.TempCleaner](be); ok && withIndex {
		// Temp files of saves killed mid-write; live writers hold a lock.
		_, _ = tc.CleanTemp(ctx, time.Hour)
	}
	err = fn(r)
	if cerr := errors.Join(r.Close(ctx), be.Close()); err == nil {
		err = cerr
	}
	return err
}
