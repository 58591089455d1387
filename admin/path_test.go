package admin

import "testing"

func TestParsePathWritesEachDatabasesSyntax(t *testing.T) {
	for _, c := range []struct{ in, postgres, json string }{
		{"customer", `{"customer"}`, `$."customer"`},
		{"customer.id", `{"customer","id"}`, `$."customer"."id"`},
		{"$.customer.id", `{"customer","id"}`, `$."customer"."id"`},
		{"items[0].sku", `{"items",0,"sku"}`, `$."items"[0]."sku"`},
		{"m[1][2]", `{"m",1,2}`, `$."m"[1][2]`},
		{"[3].a", `{3,"a"}`, `$[3]."a"`},
		{"it's a key", `{"it's a key"}`, `$."it's a key"`},
	} {
		p, err := parsePath(c.in)
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if got := p.postgres(); got != c.postgres {
			t.Errorf("%q on Postgres: %s, want %s", c.in, got, c.postgres)
		}
		if got := p.jsonPath(); got != c.json {
			t.Errorf("%q elsewhere: %s, want %s", c.in, got, c.json)
		}
	}
	for _, bad := range []string{"", "$", "a..b", "a.", `a"b`, `a\b`, "a[x]", "a[-1]", "a[1]b", "a[1", "a]"} {
		if p, err := parsePath(bad); err == nil {
			t.Errorf("%q read as %v, want an error", bad, p)
		}
	}
}

func TestStatesAndActionsReadAsTheyAreNamed(t *testing.T) {
	for _, s := range append([]State{AnyState}, States...) {
		if got, err := ParseState(s.String()); err != nil || got != s {
			t.Errorf("ParseState(%q) = %v, %v", s.String(), got, err)
		}
	}
	for _, act := range Actions {
		if got, err := ParseAction(act.String()); err != nil || got != act {
			t.Errorf("ParseAction(%q) = %v, %v", act.String(), got, err)
		}
	}
	if _, err := ParseAction("pause"); err == nil {
		t.Error("ParseAction(pause): no error, but there is no such action")
	}
}
