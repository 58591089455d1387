package schema

import (
	"slices"
	"testing"

	"github.com/sqlinbox/inbox"
)

// kindsTable has every role the claim index takes, and a kind column.
var kindsTable = inbox.Table{Name: "jobs", ID: "id", Payload: "payload", Attempt: "attempt", ProcessedAt: "processed_at",
	Queue: "queue", Kind: "kind", Priority: "priority", RetryAfter: "retry_after", DeadAt: "dead_at"}

// TestClaimIndexEndsWithTheKindWhereThePlanTestsIt: on MySQL and MariaDB the kind is the claim
// index's last column, after the claim order; on Postgres and SQLite the index has no kind; a
// table whose claim orders by the id alone needs no index, kind or not.
func TestClaimIndexEndsWithTheKindWhereThePlanTestsIt(t *testing.T) {
	for _, tc := range []struct {
		name string
		ix   func() (Index, error)
		want []string
	}{
		{"mysql", func() (Index, error) { return ClaimIndex(mysql, kindsTable) }, []string{"queue", "processed_at", "dead_at", "priority", "retry_after", "id", "kind"}},
		{"postgres", func() (Index, error) { return ClaimIndex(postgres, kindsTable) }, []string{"queue", "priority", "retry_after", "id"}},
		{"sqlite", func() (Index, error) { return ClaimIndex(sqlite, kindsTable) }, []string{"queue", "priority", "retry_after", "id"}},
		{"mysql, id and kind", func() (Index, error) {
			return ClaimIndex(mysql, inbox.Table{Name: "jobs", ID: "id", Kind: "kind"})
		}, nil},
	} {
		ix, err := tc.ix()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if !slices.Equal(ix.Columns, tc.want) {
			t.Errorf("%s: claim index %v, want %v", tc.name, ix.Columns, tc.want)
		}
	}
}

// TestAnIndexThatLacksTheKindIsReplaced: on MySQL an index with the claim's columns but the kind
// does not serve the claim; LacksKind names it, and Replacing swaps it for the claim index in
// one statement. One with the kind serves, and lacks nothing.
func TestAnIndexThatLacksTheKindIsReplaced(t *testing.T) {
	want, err := ClaimIndex(mysql, kindsTable)
	if err != nil {
		t.Fatal(err)
	}
	old := map[string][]string{"PRIMARY": {"id"}, "jobs_claim": {"queue", "processed_at", "dead_at", "priority", "retry_after", "id"}}
	if got := Serving(mysql, old, want); got != "" {
		t.Errorf("an index without the kind serves the claim: %q", got)
	}
	if got := LacksKind(mysql, old, want, kindsTable.Kind); got != "jobs_claim" {
		t.Fatalf("LacksKind = %q, want jobs_claim", got)
	}
	fix, err := want.Replacing(mysql, kindsTable.Name, "jobs_claim")
	if err != nil {
		t.Fatal(err)
	}
	if w := "ALTER TABLE `jobs` DROP INDEX `jobs_claim`, ADD INDEX `jobs_claim` (`queue`, `processed_at`, `dead_at`, `priority`, `retry_after`, `id`, `kind`)"; fix != w {
		t.Errorf("fix\n%s\nwant\n%s", fix, w)
	}
	full := map[string][]string{"jobs_claim": want.Columns}
	if Serving(mysql, full, want) != "jobs_claim" || LacksKind(mysql, full, want, "") != "" {
		t.Errorf("the full index is not found serving")
	}
	if got := LacksKind(mysql, map[string][]string{"other": {"queue", "id"}}, want, kindsTable.Kind); got != "" {
		t.Errorf("LacksKind names %q, an index that lacks more than the kind", got)
	}
}
