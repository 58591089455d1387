package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// inList rewrites a single-row statement's "id = p" into "id IN (…)" over n ids, renumbering
// Postgres placeholders after it.
func inList(c leaseCase, single string, n int) string {
	if c.name != "postgres" {
		return strings.Replace(single, "`id` = ?", "`id` IN ("+strings.Repeat("?, ", n-1)+"?)", 1)
	}
	// In the guard "id" = $k AND "locked_until" = $k+1: k ids, then the token.
	at := strings.Index(single, `"id" = $`)
	k := int(single[at+len(`"id" = $`)] - '0')
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "$" + strconv.Itoa(k+i)
	}
	return single[:at] + `"id" IN (` + strings.Join(ids, ", ") + `) AND "locked_until" = $` + strconv.Itoa(k+n)
}

// leaseBatchSettle returns what expects one statement of a batch's settlement that changes the
// rows changed, each of the ids it names: on Postgres and SQLite the statement returning the ids
// it changed; on MySQL and MariaDB the statement in a transaction, committed.
func leaseBatchSettle(m *recorder, c leaseCase, prepare func(string)) func(query string, args []driver.Value, changed ...int64) {
	return func(query string, args []driver.Value, changed ...int64) {
		if c.mysqlFamily() {
			prepare(query)
			m.mock.ExpectBegin()
			m.mock.ExpectExec(query).WithArgs(args...).WillReturnResult(leaseResult(int64(len(changed))))
			m.mock.ExpectCommit()
			return
		}
		if c.name == "postgres" {
			query += ` RETURNING "id"`
		} else {
			query += " RETURNING `id`"
		}
		prepare(query)
		rows := m.mock.NewRows([]string{"id"})
		for _, id := range changed {
			rows.AddRow(id)
		}
		m.mock.ExpectQuery(query).WithArgs(args...).WillReturnRows(rows)
	}
}

// TestLeaseBatchSequence pins a batch's statements: one claim of up to 4 rows under one token
// (on MySQL and MariaDB a stamp over 4 ids), one extension of every row, then one guarded
// statement per kind of outcome over an id list padded to the batch's size.
func TestLeaseBatchSequence(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			m := newRecorder(t, 1)
			st := c.jobs
			f := openLease(t, m, c, st)
			batch := st
			if c.mysqlFamily() {
				batch.stamp = strings.Replace(st.stamp, "IN (?)", "IN (?, ?, ?, ?)", 1)
				m.mock.ExpectPrepare(batch.stamp).WillBeClosed()
			}
			var claimed, extended driver.Value
			expectClaimOf(m, c, batch, 4, true, &claimed, leaseClaimed{7, 1}, leaseClaimed{8, 1}, leaseClaimed{9, 3})

			ids := []driver.Value{int64(7), int64(8), int64(9), int64(9)}
			prepare := func(query string) {
				m.mock.ExpectPrepare(query).WillBeClosed()
				if c.name == "sqlite" {
					m.mock.ExpectQuery("EXPLAIN " + query).WithArgs(make([]driver.Value, strings.Count(query, "?"))...).
						WillReturnRows(m.mock.NewRows([]string{"addr", "opcode"}))
				}
			}
			extend := inList(c, st.extend, 4)
			prepare(extend)
			m.mock.ExpectExec(extend).WithArgs(append(append([]driver.Value{leaseTime{want: time.Now().Add(lease.DefaultLease), into: &extended}}, ids...), leaseSame{&claimed})...).WillReturnResult(leaseResult(3))
			settle := leaseBatchSettle(m, c, prepare)
			settle(inList(c, st.ack, 4), []driver.Value{int64(7), int64(9), int64(9), int64(9), leaseSame{&extended}}, 7, 9)
			settle(inList(c, st.retryAfter, 4), []driver.Value{leaseTime{want: time.Now().Add(time.Minute)}, int64(8), int64(8), int64(8), int64(8), leaseSame{&extended}}, 8)

			ds, err := f.ClaimBatch(ctx, 4)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != 3 || ds[2].ID != 9 || ds[2].Attempt != 3 {
				t.Fatalf("claimed %+v, want rows 7, 8, 9 with row 9 at attempt 3", ds)
			}
			if err := f.Extend(ctx, ds[1]); err != nil {
				t.Fatal(err)
			}
			if err := f.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Ack(), outcome.RetryAfter(time.Minute), outcome.Drop()}); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestLeaseBatchLostSequence pins how a batch's settlement learns which rows it changed when a
// row's lease was lost (row 9, to be acked): on Postgres and SQLite from the statement's
// RETURNING; on MySQL and MariaDB the statement changes fewer rows than it names, so its
// transaction rolls back, the rows still holding the token are locked and read, and the
// statement runs again over those alone. The error names row 9 alone.
func TestLeaseBatchLostSequence(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			m := newRecorder(t, 1)
			st := c.jobs
			f := openLease(t, m, c, st)
			batch := st
			if c.mysqlFamily() {
				batch.stamp = strings.Replace(st.stamp, "IN (?)", "IN (?, ?, ?, ?)", 1)
				m.mock.ExpectPrepare(batch.stamp).WillBeClosed()
			}
			var claimed driver.Value
			expectClaimOf(m, c, batch, 4, true, &claimed, leaseClaimed{7, 1}, leaseClaimed{8, 1}, leaseClaimed{9, 1})
			prepare := func(query string) {
				m.mock.ExpectPrepare(query).WillBeClosed()
				if c.name == "sqlite" {
					m.mock.ExpectQuery("EXPLAIN " + query).WithArgs(make([]driver.Value, strings.Count(query, "?"))...).
						WillReturnRows(m.mock.NewRows([]string{"addr", "opcode"}))
				}
			}
			ack, retry := inList(c, st.ack, 4), inList(c, st.retry, 4)
			acks := []driver.Value{int64(7), int64(9), int64(9), int64(9), leaseSame{&claimed}}
			if c.mysqlFamily() {
				held := "SELECT `id` FROM `jobs` WHERE `id` IN (?, ?, ?, ?) AND `locked_until` = ? FOR UPDATE"
				prepare(ack)
				m.mock.ExpectBegin()
				m.mock.ExpectExec(ack).WithArgs(acks...).WillReturnResult(leaseResult(1))
				m.mock.ExpectRollback()
				prepare(held)
				m.mock.ExpectBegin()
				m.mock.ExpectQuery(held).WithArgs(acks...).WillReturnRows(m.mock.NewRows([]string{"id"}).AddRow(int64(7)))
				m.mock.ExpectExec(ack).WithArgs(int64(7), int64(7), int64(7), int64(7), leaseSame{&claimed}).WillReturnResult(leaseResult(1))
				m.mock.ExpectCommit()
			} else {
				leaseBatchSettle(m, c, prepare)(ack, acks, 7)
			}
			leaseBatchSettle(m, c, prepare)(retry, []driver.Value{int64(8), int64(8), int64(8), int64(8), leaseSame{&claimed}}, 8)

			ds, err := f.ClaimBatch(ctx, 4)
			if err != nil || len(ds) != 3 {
				t.Fatalf("ClaimBatch: %v, %v", ds, err)
			}
			err = f.SettleBatch(ctx, ds, []outcome.Outcome{outcome.Ack(), outcome.Retry(), outcome.Ack()})
			var lost *inbox.LeaseLostError
			if !errors.Is(err, inbox.ErrLeaseLost) || !errors.As(err, &lost) || len(lost.IDs) != 1 || lost.IDs[0] != 9 || lost.Table != "jobs" {
				t.Fatalf("SettleBatch: %v (%+v), want a *inbox.LeaseLostError of table jobs naming row 9 alone", err, lost)
			}
			if !strings.Contains(err.Error(), "rows [9]") {
				t.Errorf("the error does not name row 9: %v", err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
