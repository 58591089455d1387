package sqlmocktests

import (
	"context"
	"database/sql/driver"
	"testing"
	"time"

	"github.com/DATA-DOG/go-sqlmock"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// TestLeaseOwnConnection pins the lease form's statements while the pool has no connection to
// spare: with a pool of two, Open keeps one for the form (the plan says so) and prepares on the
// other; once the application holds that other, the claim (on MySQL its transaction), the
// extensions and the ack run on the form's own connection, each prepared there once by its
// text; Close frees them.
func TestLeaseOwnConnection(t *testing.T) {
	for _, c := range leaseCases {
		if c.name != "postgres" && c.name != "mysql" {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			m := newRecorder(t, 2)
			st := c.jobs
			expectOpen(m, c, st, "jobs")
			f := lease.New(c.d, leaseJobs, nil)
			plan, err := f.Open(ctx, m.db, inbox.Queue{})
			if err != nil {
				t.Fatal(err)
			}
			if !plan.OwnConnection {
				t.Fatalf("plan %+v on a pool of two, want OwnConnection", plan)
			}
			app, err := m.db.Conn(ctx) // the pool's other connection
			if err != nil {
				t.Fatal(err)
			}

			now := time.Now()
			var claimed, extended, again driver.Value
			rows := sqlmock.NewRows([]string{"id", "payload", "attempt"})
			if c.name == "postgres" {
				m.mock.ExpectPrepare(st.claim).WillBeClosed()
				m.mock.ExpectQuery(st.claim).WithArgs(leaseTime{want: now}, leaseTime{want: now}, int64(1), leaseTime{want: now.Add(lease.DefaultLease), into: &claimed}).
					WillReturnRows(rows.AddRow(int64(7), []byte("p"), int64(1)))
			} else {
				m.mock.ExpectBegin()
				m.mock.ExpectPrepare(st.claim).WillBeClosed()
				m.mock.ExpectQuery(st.claim).WithArgs(leaseTime{want: now}, leaseTime{want: now}, int64(1)).
					WillReturnRows(rows.AddRow(int64(7), []byte("p"), int64(0)))
				m.mock.ExpectPrepare(st.stamp).WillBeClosed()
				m.mock.ExpectExec(st.stamp).WithArgs(leaseTime{want: now.Add(lease.DefaultLease), into: &claimed}, int64(7)).WillReturnResult(leaseResult(1))
				m.mock.ExpectCommit()
			}
			m.mock.ExpectPrepare(st.extend).WillBeClosed()
			m.mock.ExpectExec(st.extend).WithArgs(leaseTime{want: now.Add(lease.DefaultLease), into: &extended}, int64(7), leaseSame{&claimed}).WillReturnResult(leaseResult(1))
			m.mock.ExpectExec(st.extend).WithArgs(leaseTime{want: now.Add(lease.DefaultLease), into: &again}, int64(7), leaseSame{&extended}).WillReturnResult(leaseResult(1))
			m.mock.ExpectPrepare(st.ack).WillBeClosed()
			m.mock.ExpectExec(st.ack).WithArgs(int64(7), leaseSame{&again}).WillReturnResult(leaseResult(1))

			d := claimOne(t, f, 7, 1)
			for range 2 {
				if err := f.Extend(ctx, d); err != nil {
					t.Fatal(err)
				}
			}
			if err := f.Settle(ctx, d, outcome.Ack()); err != nil {
				t.Fatal(err)
			}
			app.Close()
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if err := m.mock.ExpectationsWereMet(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
