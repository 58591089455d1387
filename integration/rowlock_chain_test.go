package integration

import (
	"context"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// TestRowlockSettleAndClaimChains: a settlement that claims the worker's next row (COMMIT AND
// CHAIN) has committed when it returns, its row gone for every other session, and the row it
// claimed is held: another form's claims pass over it until it settles.
func TestRowlockSettleAndClaimChains(t *testing.T) {
	forEachBackend(t, backends(t, false), func(t *testing.T, b backend) {
		c := rowlockSetup(t, b, 0, fullTable)
		c.publish(t, inbox.Message{Queue: "q"}, inbox.Message{Queue: "q"}, inbox.Message{Queue: "q"})
		f1 := c.form(t, inbox.Binding{Name: "q"}).(*rowlock.Form[rowlock.Dialect])
		f2 := c.form(t, inbox.Binding{Name: "q"})
		first := claimN(t, f1, 1, 1)[0]
		ds, settled, claimErr := f1.SettleAndClaim(context.Background(), first, outcome.Ack(), 1)
		if settled != nil || claimErr != nil || len(ds) != 1 || ds[0].ID == first.ID {
			t.Fatalf("SettleAndClaim = %v, %v, %v; want the next row, no errors", deliveryIDs(ds), settled, claimErr)
		}
		chained := ds[0]
		queued := c.q(t, "processed_at") + " IS NULL" // an Ack stamps processed_at on this table
		if n := c.rows(t, queued); n != 2 {
			t.Fatalf("%d rows unprocessed after the ack, want 2: the ack committed before the claim", n)
		}
		other := claimN(t, f2, 1, 1)[0]
		if other.ID == chained.ID || other.ID == first.ID {
			t.Fatalf("another form claimed row %d; the chained claim holds row %d", other.ID, chained.ID)
		}
		claimN(t, f2, 1, 0)
		settle(t, f1, chained, outcome.Ack())
		settle(t, f2, other, outcome.Ack())
		if n := c.rows(t, queued); n != 0 {
			t.Fatalf("%d rows unprocessed, want none", n)
		}
	})
}
