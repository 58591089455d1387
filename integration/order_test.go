package integration

import (
	"log/slog"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
)

// Claim order agrees on every database: by priority, then a row never delayed before a delayed
// row that is due, then by id.
func TestClaimOrderAgreesAcrossDatabases(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		q := b.q(t, tbl.Name)
		past := b.dialect.Time(time.Now().Add(-time.Hour))
		p := b.dialect.Placeholder
		// id 1: due after a delay; id 2: never delayed; id 3: never delayed, lower priority.
		mustExec(t, db, "INSERT INTO "+q+" (id, retry_after, priority) VALUES (1, "+p(1)+", 0)", past)
		mustExec(t, db, "INSERT INTO "+q+" (id, priority) VALUES (2, 0)")
		mustExec(t, db, "INSERT INTO "+q+" (id, priority) VALUES (3, 1)")
		f := leaseForm(t, b, db, tbl, nil, inbox.Binding{Logger: slog.New(slog.DiscardHandler)})
		var got []int64
		for range 3 {
			got = append(got, claimN(t, f, 1, 1)[0].ID)
		}
		if got[0] != 2 || got[1] != 1 || got[2] != 3 {
			t.Fatalf("claimed %v, want [2 1 3]", got)
		}
	})
}
