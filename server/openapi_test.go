package server

import (
	"bufio"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// openAPIRoutes reads the paths and their methods from docs/openapi.yaml
// (the layout it is written in: paths at two spaces, methods at four).
func openAPIRoutes(t *testing.T) (routes []string, doc string) {
	t.Helper()
	b, err := os.ReadFile("../docs/openapi.yaml")
	must(t, err)
	if !strings.HasPrefix(string(b), "openapi: 3.1") {
		t.Fatal("docs/openapi.yaml is not OpenAPI 3.1")
	}
	pathRe := regexp.MustCompile(`^  (/\S*):$`)
	methodRe := regexp.MustCompile(`^    (get|post|put|patch|delete):`)
	in, cur := false, ""
	sc := bufio.NewScanner(strings.NewReader(string(b)))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "paths:":
			in = true
		case in && line != "" && !strings.HasPrefix(line, " "):
			in = false
		case !in:
		case pathRe.MatchString(line):
			cur = pathRe.FindStringSubmatch(line)[1]
		case methodRe.MatchString(line):
			routes = append(routes, strings.ToUpper(methodRe.FindStringSubmatch(line)[1])+" "+cur)
		}
	}
	return routes, string(b)
}

// TestOpenAPICoversRoutes: every registered route is described in
// docs/openapi.yaml, the document describes no route that is not
// registered, and every error code the server sends is listed.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	documented, doc := openAPIRoutes(t)
	var registered []string
	for _, rt := range e.srv.Routes() {
		p := strings.TrimSuffix(rt.Path, "{$}")
		if p == "" {
			p = "/"
		}
		r := rt.Method + " " + p
		registered = append(registered, r)
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in docs/openapi.yaml", r)
		}
	}
	for _, d := range documented {
		if !slices.Contains(registered, d) {
			t.Errorf("docs/openapi.yaml describes %s, which the server does not serve", d)
		}
	}
	if len(documented) < 16 {
		t.Fatalf("only %d routes found in the document: %v", len(documented), documented)
	}
	codes := []string{"unauthorized", "forbidden", "bad_request", "idempotency_key_required", "bad_idempotency_key",
		"no_such_route", "method_not_allowed", "internal", errBodyTimeout.Code}
	for _, c := range errorCodes {
		codes = append(codes, c.code)
	}
	enum := doc[strings.Index(doc, "    Error:"):]
	enum = enum[:strings.Index(enum, "message:")]
	for _, c := range codes {
		if !regexp.MustCompile(`\b` + c + `\b`).MatchString(enum) {
			t.Errorf("error code %s is not in the Error schema's enum", c)
		}
	}
}
