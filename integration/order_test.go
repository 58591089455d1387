package integration

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
)

// Claim order agrees on every database: by priority, then a row never delayed before a delayed
// row that is due, then by id.
func TestClaimOrderAgreesAcrossDatabases(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db, tbl := b.openTable(t, 0, fullTable)
		ctx := context.Background()
		q := b.q(t, tbl.Name)
		past := b.dialect.Time(time.Now().Add(-time.Hour))
		p := b.dialect.Placeholder
		// id 1: due after a delay; id 2: never delayed; id 3: never delayed, lower priority.
		mustExec(t, db, "INSERT INTO "+q+" (id, retry_after, priority) VALUES (1, "+p(1)+", 0)", past)
		mustExec(t, db, "INSERT INTO "+q+" (id, priority) VALUES (2, 0)")
		mustExec(t, db, "INSERT INTO "+q+" (id, priority) VALUES (3, 1)")
		f := lease.New(b.dialect, tbl, nil)
		if _, err := f.Open(ctx, db, inbox.Queue{Logger: slog.New(slog.DiscardHandler)}); err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var got []int64
		for range 3 {
			ds, err := f.Claim(ctx, 1)
			if err != nil || len(ds) != 1 {
				t.Fatalf("claim: %d rows, %v", len(ds), err)
			}
			got = append(got, ds[0].ID)
		}
		if got[0] != 2 || got[1] != 1 || got[2] != 3 {
			t.Fatalf("claimed %v, want [2 1 3]", got)
		}
	})
}
