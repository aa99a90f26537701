package main

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"lifeboat/providers/docker/dockertest"
)

// TestProviderTestCommand: `lifeboat provider test NAME` runs the live
// smoke test against a docker instance on a private dockerd (create,
// files and browser profile, native checkpoint, portable capture,
// destroy confirmed missing, recovery compared, rollback compared),
// removes everything it made and leaves the operator's container alone;
// `--all` also tests the local instance and reports an instance whose
// API key variable is empty as blocked, not failed.
func TestProviderTestCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the lifeboat binary and dockerd")
	}
	d := dockertest.Start(t)
	cli := d.Client(t)
	ctx := context.Background()
	operators := startContainer(t, cli, "not-lifeboats")
	t.Setenv("LIFEBOAT_TEST_VERCEL_TOKEN", "")
	s := newSvcEnv(t, "\n"+dockSection(d)+`
[providers.vc]
type = "vercel"
api_key_env = "LIFEBOAT_TEST_VERCEL_TOKEN"
project_id = "prj_test"
`)

	r := s.run("--config", s.cfgPath, "provider", "test", "dock", "--json")
	if r.code != 0 {
		t.Fatalf("provider test dock: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	rep := jsonLines(t, r.stdout)[0]
	if rep["message_type"] != "provider_test" || rep["result"] != "passed" || rep["type"] != "docker" || rep["snapshot"] == nil {
		t.Fatalf("report: %v", rep)
	}
	wantChecksPassed(t, rep, allChecks...)
	if len(rep["created"].([]any)) != 4 || len(rep["destroyed"].([]any)) != 4 || rep["left"] != nil {
		t.Fatalf("not everything it made was removed: %v", rep)
	}
	l, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true})
	must(t, err)
	if len(l.Items) != 1 || l.Items[0].ID != operators || l.Items[0].State != "running" {
		t.Fatalf("containers after the test: %+v", l.Items)
	}

	r = s.run("--config", s.cfgPath, "provider", "test", "--all")
	if r.code != 0 {
		t.Fatalf("provider test --all: exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	t.Log(r.stdout)
	if ents, err := os.ReadDir(s.root); err != nil || len(ents) != 1 || ents[0].Name() != ".lifeboat" {
		t.Fatalf("the local root after the test: %v %v", ents, err)
	}
	for _, want := range []string{"provider dock (docker): PASSED", "provider local (local): PASSED",
		"provider vc (vercel): BLOCKED: credentials missing", "LIFEBOAT_TEST_VERCEL_TOKEN (api_key_env) is empty",
		"tested 2: passed dock, local; failed none; blocked vc"} {
		if !strings.Contains(r.stdout, want) {
			t.Fatalf("--all report lacks %q:\n%s", want, r.stdout)
		}
	}
	if r := s.run("--config", s.cfgPath, "provider", "test", "vc"); r.code != exitFailure || !strings.Contains(r.stdout, "BLOCKED") {
		t.Fatalf("a blocked instance named alone: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := s.run("--config", s.cfgPath, "provider", "test", "nowhere"); r.code != exitUsage || !strings.Contains(r.stderr, "dock, local, vc") {
		t.Fatalf("an unknown instance: exit %d %s", r.code, r.stderr)
	}
}

// allChecks names every check of `lifeboat provider test` on a provider
// with native checkpoints.
var allChecks = []string{"create", "write files and a browser profile", "native checkpoint", "portable capture",
	"destroy and confirm missing", "recover into a replacement", "rollback to the native checkpoint"}

// wantChecksPassed fails t unless each named check of the `provider test
// --json` report rep passed; it returns every check's result by name.
func wantChecksPassed(t *testing.T, rep map[string]any, names ...string) map[string]string {
	t.Helper()
	checks := map[string]string{}
	for _, c := range rep["checks"].([]any) {
		m := c.(map[string]any)
		checks[m["name"].(string)] = m["result"].(string)
	}
	for _, name := range names {
		if checks[name] != "passed" {
			t.Fatalf("check %q: %q (all: %v)", name, checks[name], checks)
		}
	}
	return checks
}
