package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/term"

	"lifeboat/backend"
	"lifeboat/backend/local"
	"lifeboat/repo"
)

// openBackend opens the repository location; create makes it for init.
func (g *globalOptions) openBackend(create bool) (backend.Backend, error) {
	if g.repo == "" {
		return nil, usageError{"no repository: pass --repo or set LIFEBOAT_REPO"}
	}
	if create {
		if _, err := os.Stat(filepath.Join(g.repo, "config")); err == nil {
			return nil, fmt.Errorf("%w at %s", repo.ErrRepoExists, g.repo)
		}
		return local.Create(g.repo)
	}
	be, err := local.Open(g.repo)
	if errors.Is(err, fs.ErrPermission) { // the repository may be there: say what refused whom
		return nil, fmt.Errorf("%w: %w", repo.ErrAccessDenied, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%w at %s (create one with `lifeboat init`): %w", repo.ErrNoRepository, g.repo, err)
	}
	return withCrashHook(be), nil
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
		return readPasswordFile(g.passwordFile)
	}
	if p := os.Getenv("LIFEBOAT_PASSWORD"); p != "" {
		return []byte(p), nil
	}
	return g.prompt(prompt, confirm)
}

// newPassword returns a new password from file, or from a prompt asked twice.
func (g *globalOptions) newPassword(file string) ([]byte, error) {
	if file != "" {
		return readPasswordFile(file)
	}
	return g.prompt("new password: ", true)
}

func readPasswordFile(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, usageError{fmt.Sprintf("reading password file: %v", err)}
	}
	b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
	if len(b) == 0 {
		return nil, usageError{fmt.Sprintf("password file %s is empty", path)}
	}
	return b, nil
}

func (g *globalOptions) prompt(prompt string, confirm bool) ([]byte, error) {
	f, ok := g.stdin.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return nil, usageError{"no password given: set LIFEBOAT_PASSWORD or LIFEBOAT_PASSWORD_FILE, or pass --password-file (there is no terminal to ask on)"}
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

// withRepo opens the repository with the password (withIndex also opens
// and syncs the local index), runs fn, then closes it, keeping fn's error
// first.
func (g *globalOptions) withRepo(ctx context.Context, withIndex bool, fn func(r *repo.Repository) error) error {
	be, err := g.openBackend(false)
	if err != nil {
		return err
	}
	pw, err := g.password("repository password: ", false)
	if err != nil {
		_ = be.Close()
		return err
	}
	r, err := repo.Open(ctx, be, pw, repo.Options{CacheDir: g.cacheDir, KeyHint: g.keyHint, NoIndexDB: !withIndex})
	clear(pw)
	if err != nil {
		_ = be.Close()
		return err
	}
	if lb, ok := unwrapLocal(be); ok && withIndex {
		// Temp files of saves killed mid-write; live writers hold a lock.
		_, _ = lb.CleanTemp(ctx, time.Hour)
	}
	err = fn(r)
	if cerr := errors.Join(r.Close(ctx), be.Close()); err == nil {
		err = cerr
	}
	return err
}

// unwrapLocal finds the local backend under the testing decorator.
func unwrapLocal(be backend.Backend) (*local.Backend, bool) {
	if c, ok := be.(*crashingBackend); ok {
		be = c.Backend
	}
	lb, ok := be.(*local.Backend)
	return lb, ok
}
