package stmt_test

import (
	"database/sql"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/isolation"
)

// TestScanOneAllocatesOnePerRow reads rows of a table with every column a delivery takes and
// checks that a row costs one allocation: the delivery, with the scratch its columns pass
// through.
func TestScanOneAllocatesOnePerRow(t *testing.T) {
	st, err := stmt.New(dialect.Postgres[isolation.Default]{}, inbox.Table{
		Name: "jobs", ID: "id", Payload: "payload", Attempt: "attempt", Queue: "queue", Headers: "headers",
	})
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte(`{"n":1}`)
	scan := func(dest ...any) error {
		*dest[0].(*int64) = 7
		*dest[1].(*[]byte) = payload
		*dest[2].(*sql.NullInt64) = sql.NullInt64{Int64: 2, Valid: true}
		*dest[3].(*sql.NullString) = sql.NullString{String: "emails", Valid: true}
		*dest[4].(*sql.NullString) = sql.NullString{}
		return nil
	}
	var d *inbox.Delivery
	allocs := testing.AllocsPerRun(100, func() {
		if d, err = st.ScanOne(scan); err != nil {
			t.Fatal(err)
		}
	})
	if d.ID != 7 || string(d.Payload) != `{"n":1}` || d.Attempt != 2 || d.Queue != "emails" || d.Headers != nil {
		t.Fatalf("scanned %+v, want row 7 of queue emails at attempt 2 with its payload and no headers", d)
	}
	if allocs != 1 {
		t.Errorf("ScanOne allocates %v times a row, want 1", allocs)
	}
}

// TestScanOneOwnColumns reads a row with two of the application's own columns after the roles'
// and checks that the delivery hands them out by name, converted, at one allocation more than a
// row without them.
func TestScanOneOwnColumns(t *testing.T) {
	st, err := stmt.New(dialect.MySQL[isolation.Default]{}, inbox.Table{
		Name: "jobs", ID: "id", Attempt: "attempt", Columns: []string{"account", "region"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := sqltext.New(st.D.Caps(), sqltext.Table(st.Q)).Columns(""), "`id`, `attempt`, `account`, `region`"; got != want {
		t.Fatalf("Columns = %s, want %s", got, want)
	}
	acme := any([]byte("acme")) // MySQL's driver returns text as bytes
	scan := func(dest ...any) error {
		if len(dest) != 4 {
			t.Fatalf("scanned into %d destinations, want 4", len(dest))
		}
		*dest[0].(*int64) = 7
		*dest[1].(*sql.NullInt64) = sql.NullInt64{Int64: 1, Valid: true}
		*dest[2].(*any) = acme
		*dest[3].(*any) = nil
		return nil
	}
	var d *inbox.Delivery
	allocs := testing.AllocsPerRun(100, func() {
		if d, err = st.ScanOne(scan); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 2 {
		t.Errorf("ScanOne allocates %v times a row with own columns, want 2", allocs)
	}
	if account, err := inbox.Column[string](d, "account"); err != nil || account != "acme" {
		t.Errorf(`Column[string]("account") = %q, %v; want "acme"`, account, err)
	}
	if region, err := inbox.Column[*string](d, "region"); err != nil || region != nil {
		t.Errorf(`Column[*string]("region") of NULL = %v, %v; want nil`, region, err)
	}
	if _, err := inbox.Column[int64](d, "account"); err == nil || !strings.Contains(err.Error(), `"account"`) {
		t.Errorf(`Column[int64]("account") of "acme" = %v, want an error naming the column`, err)
	}
	if _, err := inbox.Column[string](d, "tenant"); err == nil || !strings.Contains(err.Error(), `"tenant"`) || !strings.Contains(err.Error(), "account, region") {
		t.Errorf(`Column("tenant") = %v, want an error naming the column and the Columns`, err)
	}
}
