package inbox

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

type invoiceArgs struct {
	Invoice int `json:"invoice"`
}

func (invoiceArgs) Kind() string { return "invoice" }

func (a invoiceArgs) UniqueKey() string { return "invoice:" + strings.Repeat("9", a.Invoice) }

// TestJobUniqueKey: a kind whose arguments are a UniqueKeyer gives its jobs their key by default.
func TestJobUniqueKey(t *testing.T) {
	if m := Job(invoiceArgs{Invoice: 2}); m.UniqueKey != "invoice:99" {
		t.Errorf("Job(invoiceArgs) has UniqueKey %q, want invoice:99", m.UniqueKey)
	}
	if m := Job(emailArgs{}); m.UniqueKey != "" {
		t.Errorf("Job(emailArgs) has UniqueKey %q, want none", m.UniqueKey)
	}
}

// TestUniqueKeyRefused: a key where the table has no unique key column, and a key longer than
// MaxUniqueKey characters (counted as characters, not bytes), are refused before any statement,
// naming the table (and the column); a key of MaxUniqueKey characters is taken.
func TestUniqueKeyRefused(t *testing.T) {
	d := dialect.MySQL[isolation.Default]{}
	plain := Table{Name: "jobs", ID: "id", IDGenerated: true}
	keyed := Table{Name: "jobs", ID: "id", IDGenerated: true, UniqueKey: "dedupe"}
	_, err := statements(d, plain, []Message{{UniqueKey: "k"}}, false, time.Now())
	if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), "inbox.Table.UniqueKey") {
		t.Errorf("a key without a unique key column: %v, want ErrSchema naming the table and the field", err)
	}
	long := strings.Repeat("é", MaxUniqueKey+1)
	_, err = statements(d, keyed, []Message{{UniqueKey: "k"}, {UniqueKey: long}}, false, time.Now())
	if !errors.Is(err, ErrUniqueKeyTooLong) || !strings.Contains(err.Error(), `"dedupe"`) {
		t.Errorf("a key of %d characters: %v, want ErrUniqueKeyTooLong naming the column", MaxUniqueKey+1, err)
	}
	if _, err := statements(d, keyed, []Message{{UniqueKey: long[len("é"):]}}, false, time.Now()); err != nil {
		t.Errorf("a key of %d two-byte characters: %v", MaxUniqueKey, err)
	}
}

// TestUniqueScopeValidate: the scopes that cannot work are refused by Validate, naming the table
// and what to change.
func TestUniqueScopeValidate(t *testing.T) {
	base := Table{Name: "jobs", ID: "id", ProcessedAt: "processed_at", UniqueKey: "dedupe"}
	for _, tc := range []struct {
		what    string
		scope   func(*Table)
		mention string
	}{
		{"a scope without a key", func(t *Table) { t.UniqueKey, t.UniqueWhileQueued = "", true }, "inbox.Table.UniqueKey"},
		{"two scopes", func(t *Table) { t.UniqueWhileQueued, t.UniqueWindow = true, time.Hour }, "choose one scope"},
		{"a negative window", func(t *Table) { t.UniqueWindow = -time.Second }, "negative"},
		{"a window without processed_at", func(t *Table) { t.ProcessedAt, t.UniqueWindow = "", time.Hour }, "inbox.Table.ProcessedAt"},
	} {
		tbl := base
		tc.scope(&tbl)
		if err := tbl.Validate(); !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), `"jobs"`) || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("%s: Validate() = %v, want ErrSchema naming the table and %q", tc.what, err, tc.mention)
		}
	}
	for _, scope := range []func(*Table){func(*Table) {}, func(t *Table) { t.UniqueWhileQueued = true }, func(t *Table) { t.UniqueWindow = time.Hour }} {
		tbl := base
		scope(&tbl)
		if err := tbl.Validate(); err != nil {
			t.Errorf("%+v: %v", tbl, err)
		}
	}
}
