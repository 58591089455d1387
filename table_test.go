package inbox_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

func TestTableValidate(t *testing.T) {
	full := inbox.Table{
		Name: "jobs", ID: "id", Payload: "payload", Attempt: "attempt", ProcessedAt: "processed_at",
		Queue: "grp", Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
	}
	if err := full.Validate(); err != nil {
		t.Errorf("a table with every role: %v", err)
	}
	if err := (inbox.Table{Name: "jobs", ID: "id"}).Validate(); err != nil {
		t.Errorf("a table with an id only: %v", err)
	}

	tests := []struct {
		what    string
		table   inbox.Table
		mention []string
	}{
		{"no name", inbox.Table{ID: "id"}, []string{"Name"}},
		{"no id", inbox.Table{Name: "jobs", Payload: "payload"}, []string{`"jobs"`, "ID"}},
		{"id twice", inbox.Table{Name: "jobs", ID: "id", Attempt: "id"}, []string{`"jobs"`, `"id"`, "ID", "Attempt"}},
		{"one column for two roles", inbox.Table{Name: "jobs", ID: "id", RetryAfter: "at", ProcessedAt: "at"}, []string{`"jobs"`, `"at"`, "ProcessedAt", "RetryAfter"}},
		{"an own column that is a role's", inbox.Table{Name: "jobs", ID: "id", Priority: "prio", Columns: []string{"account", "prio"}}, []string{`"jobs"`, `"prio"`, "Priority", "Columns"}},
		{"an own column twice", inbox.Table{Name: "jobs", ID: "id", Columns: []string{"account", "account"}}, []string{`"jobs"`, `"account"`, "twice"}},
		{"an empty own column", inbox.Table{Name: "jobs", ID: "id", Columns: []string{""}}, []string{`"jobs"`, "empty", "Columns"}},
	}
	for _, tt := range tests {
		wantSchemaError(t, tt.what+": Validate()", tt.table.Validate(), tt.mention)
	}
}

func TestTableQuote(t *testing.T) {
	pg := dialect.Postgres[isolation.Default]{}
	my := dialect.MySQL[isolation.Default]{}

	tbl := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: `pay"load`, Queue: "queue", Columns: []string{"account", `a"b`}}
	q, err := tbl.Quote(pg)
	if err != nil {
		t.Fatal(err)
	}
	want := inbox.Table{Name: `"jobs"`, ID: `"id"`, IDGenerated: true, Payload: `"pay""load"`, Queue: `"queue"`, Columns: []string{`"account"`, `"a""b"`}}
	if !reflect.DeepEqual(q, want) {
		t.Errorf("Quote(postgres) = %+v, want %+v", q, want)
	}
	if tbl.Columns[0] != "account" {
		t.Errorf("Quote changed the description's Columns: %q", tbl.Columns)
	}
	if q, err = tbl.Quote(my); err != nil || q.Payload != "`pay\"load`" || q.Attempt != "" {
		t.Errorf("Quote(mysql) = %+v, %v: want backticks, absent roles left empty", q, err)
	}

	long := strings.Repeat("c", 64)
	tests := []struct {
		what    string
		d       dialect.Dialect
		table   inbox.Table
		mention []string
	}{
		{"invalid description", pg, inbox.Table{Name: "jobs"}, []string{`"jobs"`, "ID"}},
		{"long table name", pg, inbox.Table{Name: long, ID: "id"}, []string{"table name", long}},
		{"long column", pg, inbox.Table{Name: "jobs", ID: "id", Headers: long}, []string{`"jobs"`, "Headers", long}},
		{"NUL in a column", my, inbox.Table{Name: "jobs", ID: "id", Queue: "g\x00"}, []string{`"jobs"`, "Queue"}},
		{"long column on MySQL", my, inbox.Table{Name: "jobs", ID: "id", Priority: long + "c"}, []string{`"jobs"`, "Priority"}},
		{"long own column", pg, inbox.Table{Name: "jobs", ID: "id", Columns: []string{long}}, []string{`"jobs"`, "Columns", long}},
	}
	for _, tt := range tests {
		_, err := tt.table.Quote(tt.d)
		wantSchemaError(t, tt.what+": Quote()", err, tt.mention)
	}
	// 64 characters is within MySQL's limit though over Postgres's.
	if _, err := (inbox.Table{Name: "jobs", ID: "id", Headers: long}).Quote(my); err != nil {
		t.Errorf("a 64-character column on MySQL: %v", err)
	}
}

// wantSchemaError checks that err, what call returned, wraps ErrSchema and names each of
// mention.
func wantSchemaError(t *testing.T, call string, err error, mention []string) {
	t.Helper()
	if !errors.Is(err, inbox.ErrSchema) {
		t.Errorf("%s = %v, want an error wrapping ErrSchema", call, err)
		return
	}
	for _, m := range mention {
		if !strings.Contains(err.Error(), m) {
			t.Errorf("%s: %q does not name %#q", call, err, m)
		}
	}
}
