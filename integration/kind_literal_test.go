package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
)

// oddJob's kind holds a quote, a backslash before a quote, and what would follow a literal
// that ended early: a claim names it as a string literal (dialect.Caps.Literal), and must take
// its rows and no other.
type oddJob struct{ N int }

// oddKind is oddJob's kind.
const oddKind = `it's\' OR 1 = 1 OR 'x`

func (oddJob) Kind() string { return oddKind }

// oddDecoys are the kinds a literal of oddKind read wrongly would name instead: its backslash
// dropped, or read as two.
var oddDecoys = []string{`it's' OR 1 = 1 OR 'x`, `it's\\' OR 1 = 1 OR 'x`}

// TestKindNamesAreLiterals: a consumer of a kind whose name holds quotes and a backslash
// claims every row of that kind and none of its decoys', on every database and form, and also
// on sessions whose settings change how '…' reads a backslash: Postgres with
// standard_conforming_strings off, MySQL and MariaDB with NO_BACKSLASH_ESCAPES in sql_mode.
func TestKindNamesAreLiterals(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		sessions := map[string]string{"default": ""}
		switch c.b.dialect.Caps().Strings {
		case dialect.EscapeStrings:
			sessions["standard_conforming_strings off"] = "standard_conforming_strings=off"
		case dialect.HexStrings:
			sessions["NO_BACKSLASH_ESCAPES"] = "sql_mode=CONCAT(@@sql_mode,%27,NO_BACKSLASH_ESCAPES%27)"
		}
		for name, param := range sessions {
			t.Run(name, func(t *testing.T) {
				dsn := c.dsn(t)
				if param != "" {
					sep := "?"
					if strings.Contains(dsn, "?") {
						sep = "&"
					}
					dsn += sep + param
				}
				db := c.openDSN(t, dsn, 8)
				tbl := c.b.newTable(t, db, kindTable)
				msgs := []inbox.Message{inbox.Job(oddJob{1}), inbox.Job(oddJob{2})}
				for _, k := range oddDecoys {
					msgs = append(msgs, inbox.Message{Kind: k, Payload: []byte(`{"N":0}`)})
				}
				c.b.enqueue(t, db, tbl, msgs...)

				var odd inbox.Kinds
				inbox.Handle(&odd, func(ctx context.Context, d *inbox.Delivery, j oddJob) error { return nil })
				stop := runConsumer(t, db, c.newForm(t, tbl), &odd, &inbox.Config{Workers: 2})
				kindIs := c.q(t, tbl.Kind) + " = " + c.ph(1)
				processed := kindIs + " AND " + c.q(t, tbl.ProcessedAt) + " IS NOT NULL"
				waitFor(t, 30*time.Second, "the rows of the odd kind processed", func() bool {
					return c.b.countRows(t, db, tbl, processed, oddKind) == 2
				})
				time.Sleep(4 * cellPoll) // the consumer polls on, with only the decoys left
				stop()
				untouched := kindIs + " AND " + c.q(t, tbl.Attempt) + " = 0 AND " + c.q(t, tbl.ProcessedAt) + " IS NULL"
				for _, k := range oddDecoys {
					if n := c.b.countRows(t, db, tbl, untouched, k); n != 1 {
						t.Errorf("the row of kind %q: %d untouched, want 1: the claim of %q took it", k, n, oddKind)
					}
				}
			})
		}
	})
}

// listDecoys are kinds near those of alphaJob, betaJob and gammaJob: joined by the separator
// of the one literal SQLite looks a row's kind up in instead of an IN list of more than two
// kinds (dialect.Caps.InListTempIndex), with it on one side or both, joined without it, or cut
// short.
var listDecoys = []string{"alpha,beta", ",alpha", "gamma,", ",beta,", "alphabeta", "alph", "lpha"}

// TestKindListTakesItsKindsAlone: a consumer of three kinds claims every row of them and none
// of the decoys', on every database and form.
func TestKindListTakesItsKindsAlone(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		db := c.b.open(t, 8)
		tbl := c.b.newTable(t, db, kindTable)
		msgs := mixedJobs(0, 6)
		for _, k := range listDecoys {
			msgs = append(msgs, inbox.Message{Kind: k, Payload: []byte(`{"N":0}`)})
		}
		c.b.enqueue(t, db, tbl, msgs...)

		var log kindLog
		var three inbox.Kinds
		inbox.Handle(&three, func(ctx context.Context, d *inbox.Delivery, j alphaJob) error { log.add(d); return nil })
		inbox.Handle(&three, func(ctx context.Context, d *inbox.Delivery, j betaJob) error { log.add(d); return nil })
		inbox.Handle(&three, func(ctx context.Context, d *inbox.Delivery, j gammaJob) error { log.add(d); return nil })
		stop := runConsumer(t, db, c.newForm(t, tbl), &three, &inbox.Config{Workers: 2})
		processed := c.q(t, tbl.ProcessedAt) + " IS NOT NULL"
		waitFor(t, 30*time.Second, "the rows of the three kinds processed", func() bool { return len(c.ids(t, db, tbl, processed)) == 6 })
		time.Sleep(4 * cellPoll) // the consumer polls on, with only the decoys left
		stop()
		if got := log.kinds(); !slices.Equal(got, []string{"alpha", "beta", "gamma"}) {
			t.Errorf("the consumer was handed kinds %v, want alpha, beta and gamma", got)
		}
		untouched := c.q(t, tbl.Kind) + " = " + c.ph(1) + " AND " + c.q(t, tbl.Attempt) + " = 0 AND " + c.q(t, tbl.ProcessedAt) + " IS NULL"
		for _, k := range listDecoys {
			if n := c.b.countRows(t, db, tbl, untouched, k); n != 1 {
				t.Errorf("the row of kind %q: %d untouched, want 1: the claim of alpha, beta and gamma took it", k, n)
			}
		}
	})
}
