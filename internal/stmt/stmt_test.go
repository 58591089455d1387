package stmt_test

import (
	"database/sql"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/isolation"
)

// TestScanOneAllocatesOnePerRow reads rows of a table with every column a delivery takes and
// checks that a row costs one allocation: the delivery, with the scratch its columns pass
// through.
func TestScanOneAllocatesOnePerRow(t *testing.T) {
	st, err := stmt.New(dialect.Postgres[isolation.Default]{}, inbox.Table{
		Name: "jobs", ID: "id", Payload: "payload", Attempt: "attempt", Group: "queue", Headers: "headers",
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
	if d.ID != 7 || string(d.Payload) != `{"n":1}` || d.Attempt != 2 || d.Group != "emails" || d.Headers != nil {
		t.Fatalf("scanned %+v, want row 7 of queue emails at attempt 2 with its payload and no headers", d)
	}
	if allocs != 1 {
		t.Errorf("ScanOne allocates %v times a row, want 1", allocs)
	}
}
