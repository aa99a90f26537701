package blob

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestIDText(t *testing.T) {
	t.Parallel()
	id := ID{0xde, 0xad, 0xbe, 0xef}
	s := id.String()
	if len(s) != 64 || !strings.HasPrefix(s, "deadbeef") || id.Short() != "deadbeef" {
		t.Fatalf("String %q Short %q", s, id.Short())
	}
	back, err := ParseID(strings.ToUpper(s))
	if err != nil || back != id {
		t.Fatalf("ParseID: %v %v", back, err)
	}
	for _, bad := range []string{"", "deadbeef", s + "00", strings.Repeat("zz", 32)} {
		if _, err := ParseID(bad); err == nil {
			t.Errorf("ParseID(%q) accepted", bad)
		}
	}
	b, _ := json.Marshal(struct{ ID ID }{id})
	var v struct{ ID ID }
	if err := json.Unmarshal(b, &v); err != nil || v.ID != id {
		t.Fatalf("JSON round trip: %s %v", b, err)
	}
}

func TestTiersAndTypes(t *testing.T) {
	t.Parallel()
	for _, tier := range Tiers {
		p, err := ParseTier(tier.String())
		if err != nil || p != tier {
			t.Fatalf("tier %v: %v %v", tier, p, err)
		}
	}
	if _, err := ParseTier("root"); err == nil {
		t.Fatal("unknown tier accepted")
	}
	if Tier(3).Valid() || Type(3).Valid() || !Data.Valid() || !Tree.Valid() {
		t.Fatal("validity")
	}
	// Values are part of the format.
	if Workspace != 1 || Sensitive != 2 || Data != 1 || Tree != 2 {
		t.Fatal("format values changed")
	}
	if _, err := Tier(9).MarshalText(); err == nil {
		t.Fatal("invalid tier marshalled")
	}
}
