package config

import (
	"strings"
	"testing"
)

// [state] url names a PostgreSQL state store; its password comes from
// password_file or password_env and never from the URL, and Show never
// prints it.
func TestStateDatabase(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	const pgPassword = "pg-s3cret-value"
	path := f.write("lifeboat.toml", minimal)
	c := f.mustLoad(path, map[string]string{"LB_PG": pgPassword},
		"state.url=postgres://lifeboat@db.internal:5432/lifeboat?sslmode=require", "state.password_env=LB_PG")
	if c.State.URL != "postgres://lifeboat@db.internal:5432/lifeboat?sslmode=require" || c.State.PasswordEnv != "LB_PG" {
		t.Fatalf("state: %+v", c.State)
	}
	if pw, err := c.StatePassword(); err != nil || string(pw) != pgPassword {
		t.Fatalf("StatePassword = %q, %v", pw, err)
	}
	out := show(t, c)
	if strings.Contains(out, pgPassword) || !strings.Contains(out, `url = "postgres://lifeboat@db.internal:5432/lifeboat?sslmode=require"`) ||
		!strings.Contains(out, "LB_PG is set (its value is never shown)") {
		t.Fatalf("show:\n%s", out)
	}
	c = f.mustLoad(path, nil, "state.password_file={{dir}}/repo.pw", "state.url=postgresql://u@h/db")
	if pw, err := c.StatePassword(); err != nil || string(pw) != passwordContent {
		t.Fatalf("password file: %q %v", pw, err)
	}
	if c = f.mustLoad(path, nil); c.State.URL != "" {
		t.Fatalf("default: %+v", c.State)
	}
	if pw, err := c.StatePassword(); err != nil || pw != nil {
		t.Fatalf("no password source: %q %v", pw, err)
	}
	for _, tc := range []struct {
		sets []string
		want string
	}{
		{[]string{"state.url=postgres://u:" + pgPassword + "@h/db"}, "holds a password"},
		{[]string{"state.url=postgres://u@h/db?password=" + pgPassword}, "holds a password"},
		{[]string{"state.url=mysql://u@h/db"}, "not a PostgreSQL URL"},
		{[]string{"state.password_env=LB_PG"}, "no url"},
		{[]string{"state.url=postgres://u@h/db", "state.password_env=LB_PG", "state.password_file={{dir}}/repo.pw"}, "both set"},
	} {
		_, err := f.load(path, nil, tc.sets...)
		if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), pgPassword) {
			t.Errorf("%v: %v (want %q, never the password)", tc.sets, err, tc.want)
		}
	}
}
