package sqlmocktests

import (
	"context"
	"database/sql/driver"
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

// TestLeaseBatchSequence pins a batch's statements: one claim of up to 4 rows under one token
// (on MySQL and MariaDB a stamp over 4 ids), one extension of every row, then one guarded
// statement per kind of outcome over an id list padded to the batch's size.
func TestLeaseBatchSequence(t *testing.T) {
	for _, c := range leaseCases {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			m := newRecorder(t, 1)
			st := c.jobs
			expectOpen(m, c, st, "jobs")
			f := lease.New(c.d, leaseJobs, nil)
			if _, err := f.Open(ctx, m.db, inbox.Queue{}); err != nil {
				t.Fatal(err)
			}
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
			ack := inList(c, st.ack, 4)
			prepare(ack)
			m.mock.ExpectExec(ack).WithArgs(int64(7), int64(9), int64(9), int64(9), leaseSame{&extended}).WillReturnResult(leaseResult(2))
			retryAfter := inList(c, st.retryAfter, 4)
			prepare(retryAfter)
			m.mock.ExpectExec(retryAfter).WithArgs(leaseTime{want: time.Now().Add(time.Minute)}, int64(8), int64(8), int64(8), int64(8), leaseSame{&extended}).WillReturnResult(leaseResult(1))

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
