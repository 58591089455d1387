package sqlmocktests

import (
	"database/sql/driver"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/outcome"
)

// The claims of a consumer of two kinds (inbox.Kinds) over a table with a kind column: the
// golden files' "claim, kinds 3, 25", which takes rows of the two kinds alone, each below its
// own attempt limit, the kinds' names written into its text in the consumer's order (by limit,
// then name) and bound by none of its arguments: the mock refuses a claim that binds more than
// the fixture's arguments.

// kindsShape has every role and a kind column.
var kindsShape = goldenShape("kinds")

// twoKinds is the queue of a consumer of two kinds: "report", whose own limit is 3, and
// "email", under the consumer's limit of 25; in the order the consumer's claims name them.
var twoKinds = inbox.Binding{Name: "emails", MaxAttempts: inbox.DefaultMaxAttempts, Kinds: []inbox.ClaimedKind{
	{Kind: "report", MaxAttempts: 3},
	{Kind: "email", MaxAttempts: inbox.DefaultMaxAttempts},
}}

// checkKind checks that d is row id of kind kind.
func checkKind(t *testing.T, d *inbox.Delivery, id int64, kind string) {
	t.Helper()
	if d.ID != id || d.Kind != kind {
		t.Fatalf("claimed row %d of kind %q, want row %d of kind %q", d.ID, d.Kind, id, kind)
	}
}

// TestRowlockClaimsOfTwoKinds: each claim is the kinds' claim, binding now and the queue alone;
// the delivery reads its row's kind; an empty claim ends its transaction.
func TestRowlockClaimsOfTwoKinds(t *testing.T) {
	for _, c := range rowlockCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openRowlock(t, c, kindsShape, 0, twoKinds)
			r := rowlockRow(5)
			r.kind = "email"
			fx.expectRowlockClaim("claim", r)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(fx.c.near(time.Now()), int64(5)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			d := rowlockClaimOne(t, f)
			checkKind(t, d, 5, "email")
			settle(t, f, d, outcome.Ack())

			r = rowlockRow(6)
			r.kind = "report"
			fx.expectRowlockClaim("claim", r)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(fx.c.near(time.Now()), int64(6)).WillReturnResult(changed(1))
			fx.mock.ExpectCommit()
			d = rowlockClaimOne(t, f)
			checkKind(t, d, 6, "report")
			settle(t, f, d, outcome.Ack())

			fx.expectRowlockClaim("claim")
			fx.mock.ExpectRollback()
			if ds := claimed(t, f.Claim, 1); len(ds) != 0 {
				t.Fatalf("an empty claim returned %d rows", len(ds))
			}
			fx.closed(t, f)
		})
	}
}

// TestLeaseClaimsOfTwoKinds: on every database the lease claim of the two kinds binds now, the
// queue, then the lease's arguments, and no kind; the delivery reads its row's kind.
func TestLeaseClaimsOfTwoKinds(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			fx, f := openLease(t, c, kindsShape, 1, twoKinds)
			var token driver.Value
			r := leaseRow(7, 1)
			r.kind = "report"
			fx.expectLeaseClaim(1, &token, r)
			fx.mock.ExpectExec(fx.sql("ack")).WithArgs(c.near(time.Now()), int64(7), sameValue{&token}).WillReturnResult(changed(1))
			d := claimOne(t, f, 7, 1)
			checkKind(t, d, 7, "report")
			settle(t, f, d, outcome.Ack())
			fx.closed(t, f)
		})
	}
}

// equalValues reports whether a and b hold the same values in the same order.
func equalValues(a, b []driver.Value) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
