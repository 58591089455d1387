package harness

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"testing"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		query     string
		kind      statementKind
		unflushed bool
	}{
		{"SELECT id FROM t WHERE 1 = 1 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED", otherStatement, false},
		{"DELETE FROM \"jobs\" WHERE \"id\" = $1", writeStatement, false},
		{"  update t SET a = 1", writeStatement, false},
		{"INSERT INTO t (a) VALUES (?) ON DUPLICATE KEY UPDATE a = 1", writeStatement, false},
		{"REPLACE INTO t VALUES (1)", writeStatement, false},
		{`WITH p AS (SELECT "id" FROM "jobs" ORDER BY "id" LIMIT 1 FOR UPDATE SKIP LOCKED), c AS (UPDATE "jobs" SET "locked_until" = $1 FROM p WHERE "jobs"."id" = p."id" RETURNING "jobs"."id") SELECT "id" FROM c`, writeStatement, false},
		{`WITH p AS (SELECT id FROM t FOR NO KEY UPDATE SKIP LOCKED) SELECT id FROM p`, otherStatement, false},
		{`WITH p AS (SELECT 'update' AS "delete") SELECT * FROM p`, otherStatement, false},
		{`WITH p AS (SELECT id FROM t WHERE (SELECT set_config('synchronous_commit', 'off', true)) = 'off' FOR UPDATE SKIP LOCKED), c AS (UPDATE t SET a = 1 FROM p WHERE t.id = p.id RETURNING t.id) SELECT id FROM c`, writeStatement, true},
		{"SET LOCAL synchronous_commit = off", otherStatement, true},
		{"SET LOCAL synchronous_commit = on", otherStatement, false},
		{"BEGIN IMMEDIATE", beginStatement, false},
		{"START TRANSACTION", beginStatement, false},
		{"COMMIT", commitStatement, false},
		{"COMMIT AND CHAIN", commitStatement, false},
		{"COMMIT AND NO CHAIN", commitStatement, false},
		{"end", commitStatement, false},
		{"ROLLBACK", rollbackStatement, false},
		{"ROLLBACK TO SAVEPOINT s", otherStatement, false},
		{"SELECT pg_try_advisory_lock(hashtextextended($1, 0))", otherStatement, false},
		{"", otherStatement, false},
	} {
		if got := classify(c.query); got.kind != c.kind || got.unflushed != c.unflushed {
			t.Errorf("classify(%q) = %+v, want kind %d, unflushed %v", c.query, got, c.kind, c.unflushed)
		}
	}
	// A COMMIT AND CHAIN (the row lock form's settlement before its worker's next claim) leaves
	// the connection in a transaction.
	for query, chains := range map[string]bool{"COMMIT AND CHAIN": true, "commit and chain": true, "COMMIT AND NO CHAIN": false, "COMMIT": false, "END": false} {
		if got := classify(query); got.chains != chains {
			t.Errorf("classify(%q).chains = %v, want %v", query, got.chains, chains)
		}
	}
}

// TestWireCountsTurnarounds: a round trip begins at the first write after a read that returned
// data, however many writes the request takes.
func TestWireCountsTurnarounds(t *testing.T) {
	client, server := net.Pipe()
	defer server.Close()
	trips := new(Trips)
	c, _ := trips.dialed(client, nil)
	defer c.Close()
	go func() { // the server answers each request of two pieces with one byte
		buf := make([]byte, 2)
		for {
			if _, err := io.ReadFull(server, buf); err != nil {
				return
			}
			if _, err := server.Write([]byte{1}); err != nil {
				return
			}
		}
	}()
	for i := range 3 {
		c.Write([]byte{'a'})
		c.Write([]byte{'b'})
		if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
			t.Fatal(err)
		}
		if got := trips.Snapshot().Wire; got != int64(i+1) {
			t.Fatalf("after %d requests of two writes each: %d round trips", i+1, got)
		}
	}
}

// TestCountingSQLite runs each kind of statement through a counting target and checks what
// was counted: the calls, COMMITs by Tx.Commit and by statement, statements committed on
// their own, and what the library asks of a connection through Raw.
func TestCountingSQLite(t *testing.T) {
	ctx := context.Background()
	tg, err := OpenCounting(ctx, "sqlite", filepath.Join(t.TempDir(), "trips.db"), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer tg.Close()
	db := tg.DB
	step := func(what string, want TripCounts, f func() error) {
		t.Helper()
		before := tg.Trips.Snapshot()
		if err := f(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := tg.Trips.Snapshot().Sub(before)
		got.Calls[CallReset] = 0 // database/sql's, on each reuse of the connection
		if got != want {
			t.Errorf("%s counted %+v, want %+v", what, got, want)
		}
	}
	calls := func(m map[Call]int64) (c [numCalls]int64) {
		for k, v := range m {
			c[k] = v
		}
		return c
	}
	step("CREATE TABLE", TripCounts{Calls: calls(map[Call]int64{CallExec: 1})}, func() error {
		_, err := db.ExecContext(ctx, "CREATE TABLE t (id INTEGER PRIMARY KEY, a INTEGER)")
		return err
	})
	step("an INSERT on its own", TripCounts{Calls: calls(map[Call]int64{CallExec: 1}), Autocommits: 1}, func() error {
		_, err := db.ExecContext(ctx, "INSERT INTO t (a) VALUES (?)", 1)
		return err
	})
	step("an UPDATE on its own that changes nothing", TripCounts{Calls: calls(map[Call]int64{CallExec: 1})}, func() error {
		_, err := db.ExecContext(ctx, "UPDATE t SET a = 2 WHERE id = 0")
		return err
	})
	step("an UPDATE … RETURNING on its own, with rows and without", TripCounts{Calls: calls(map[Call]int64{CallQuery: 2}), Autocommits: 1}, func() error {
		for _, id := range []int{1, 0} {
			var got []int
			rows, err := db.QueryContext(ctx, "UPDATE t SET a = a WHERE id = ? RETURNING id", id)
			if err != nil {
				return err
			}
			for rows.Next() {
				var v int
				if err := rows.Scan(&v); err != nil {
					return err
				}
				got = append(got, v)
			}
			if err := rows.Close(); err != nil {
				return err
			}
			if want := min(id, 1); len(got) != want {
				t.Errorf("UPDATE … RETURNING of row %d returned %v", id, got)
			}
		}
		return nil
	})
	step("two UPDATE … RETURNING open at once on a connection", TripCounts{Calls: calls(map[Call]int64{CallQuery: 2}), Autocommits: 2}, func() error {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		var open []*sql.Rows
		for range 2 {
			rows, err := conn.QueryContext(ctx, "UPDATE t SET a = a WHERE id = 1 RETURNING id")
			if err != nil {
				return err
			}
			defer rows.Close()
			open = append(open, rows)
		}
		// Each reads its own row: the second did not take the first's wrapper.
		for i, rows := range open {
			if !rows.Next() {
				return fmt.Errorf("rows %d: no row: %v", i, rows.Err())
			}
		}
		return nil
	})
	step("a SELECT on its own", TripCounts{Calls: calls(map[Call]int64{CallQuery: 1})}, func() error {
		var n int
		return db.QueryRowContext(ctx, "SELECT COUNT(*) FROM t").Scan(&n)
	})
	step("a transaction committed", TripCounts{Calls: calls(map[Call]int64{CallBegin: 1, CallExec: 2, CallCommit: 1}), Commits: 1}, func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		for range 2 {
			if _, err := tx.ExecContext(ctx, "UPDATE t SET a = a + 1"); err != nil {
				return err
			}
		}
		return tx.Commit()
	})
	step("a transaction rolled back", TripCounts{Calls: calls(map[Call]int64{CallBegin: 1, CallExec: 1, CallRollback: 1})}, func() error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, "DELETE FROM t"); err != nil {
			return err
		}
		return tx.Rollback()
	})
	step("BEGIN and COMMIT by statement, on a pinned connection", TripCounts{Calls: calls(map[Call]int64{CallExec: 3}), Commits: 1}, func() error {
		conn, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer conn.Close()
		for _, s := range []string{"BEGIN IMMEDIATE", "UPDATE t SET a = 0", "COMMIT"} {
			if _, err := conn.ExecContext(ctx, s); err != nil {
				return err
			}
		}
		// The library asks the connection through Raw whether it still stands.
		return conn.Raw(func(dc any) error {
			r, ok := dc.(driver.SessionResetter)
			if !ok {
				t.Errorf("a %T, through Raw, is no driver.SessionResetter", dc)
				return nil
			}
			return r.ResetSession(ctx)
		})
	})
	step("a prepared statement, on its own and in a transaction", TripCounts{
		Calls: calls(map[Call]int64{CallPrepare: 1, CallExec: 2, CallBegin: 1, CallCommit: 1, CallClose: 1}), Autocommits: 1, Commits: 1,
	}, func() error {
		st, err := db.PrepareContext(ctx, "UPDATE t SET a = ? WHERE id = 1")
		if err != nil {
			return err
		}
		defer st.Close()
		if _, err := st.ExecContext(ctx, 5); err != nil {
			return err
		}
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, 6); err != nil {
			return err
		}
		if err := tx.Commit(); err != nil {
			return err
		}
		return st.Close()
	})
}

// TestCountingAllocatesNothingPerCall: a transaction, a statement on its own and a query that
// returns the rows it changed allocate no more through the counting wrapper than without it,
// once its connection is open. (database/sql's transaction starts a goroutine, whose
// allocations land in one run or the next: the test compares averages over many runs.)
func TestCountingAllocatesNothingPerCall(t *testing.T) {
	plain, counted := sql.OpenDB(nopConnector{}), sql.OpenDB(&countingConnector{inner: nopConnector{}, trips: new(Trips)})
	defer plain.Close()
	defer counted.Close()
	allocs := func(db *sql.DB) float64 {
		const runs = 2000
		work := nopWork(t, db)
		work() // opens the connection
		before := Mallocs()
		for range runs {
			work()
		}
		return float64(Mallocs()-before) / runs
	}
	if p, c := allocs(plain), allocs(counted); c > p+0.5 {
		t.Errorf("the work allocates %.2f times through the counting wrapper, %.2f without", c, p)
	}
}

// BenchmarkCounting is what counting adds to the calls of nopWork, against a driver that does
// nothing.
func BenchmarkCounting(b *testing.B) {
	for _, c := range []struct {
		name string
		conn driver.Connector
	}{{"plain", nopConnector{}}, {"counted", &countingConnector{inner: nopConnector{}, trips: new(Trips)}}} {
		b.Run(c.name, func(b *testing.B) {
			db := sql.OpenDB(c.conn)
			defer db.Close()
			work := nopWork(b, db)
			b.ReportAllocs()
			for b.Loop() {
				work()
			}
		})
	}
}

// nopWork is a transaction of two statements, a statement on its own and a query that returns
// the row it changed, on db.
func nopWork(tb testing.TB, db *sql.DB) func() {
	ctx := context.Background()
	return func() {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			tb.Fatal(err)
		}
		for range 2 {
			if _, err := tx.ExecContext(ctx, "UPDATE t SET a = ? WHERE id = 1", 1); err != nil {
				tb.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			tb.Fatal(err)
		}
		if _, err := db.ExecContext(ctx, "DELETE FROM t WHERE id = ?", 1); err != nil {
			tb.Fatal(err)
		}
		var id int64
		if err := db.QueryRowContext(ctx, "UPDATE t SET a = 2 WHERE id = ? RETURNING id", 1).Scan(&id); err != nil {
			tb.Fatal(err)
		}
	}
}

// nopConnector's connections run every statement at once: an Exec changes one row, a Query
// returns one row of one column.
type nopConnector struct{}

func (nopConnector) Connect(context.Context) (driver.Conn, error) { return nopConn{}, nil }
func (nopConnector) Driver() driver.Driver                        { return nil }

type nopConn struct{}

func (nopConn) Prepare(string) (driver.Stmt, error) { return nopStmt{}, nil }
func (nopConn) PrepareContext(context.Context, string) (driver.Stmt, error) {
	return nopStmt{}, nil
}
func (nopConn) Close() error                                                 { return nil }
func (nopConn) Begin() (driver.Tx, error)                                    { return nopTx{}, nil }
func (nopConn) BeginTx(context.Context, driver.TxOptions) (driver.Tx, error) { return nopTx{}, nil }
func (nopConn) ExecContext(context.Context, string, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(1), nil
}
func (nopConn) QueryContext(context.Context, string, []driver.NamedValue) (driver.Rows, error) {
	return &nopRows{}, nil
}

type nopStmt struct{}

func (nopStmt) Close() error                               { return nil }
func (nopStmt) NumInput() int                              { return -1 }
func (nopStmt) Exec([]driver.Value) (driver.Result, error) { return driver.RowsAffected(1), nil }
func (nopStmt) Query([]driver.Value) (driver.Rows, error)  { return &nopRows{}, nil }
func (nopStmt) ExecContext(context.Context, []driver.NamedValue) (driver.Result, error) {
	return driver.RowsAffected(1), nil
}
func (nopStmt) QueryContext(context.Context, []driver.NamedValue) (driver.Rows, error) {
	return &nopRows{}, nil
}

type nopTx struct{}

func (nopTx) Commit() error   { return nil }
func (nopTx) Rollback() error { return nil }

type nopRows struct{ done bool }

func (*nopRows) Columns() []string { return []string{"id"} }
func (*nopRows) Close() error      { return nil }
func (r *nopRows) Next(dest []driver.Value) error {
	if r.done {
		return io.EOF
	}
	r.done, dest[0] = true, int64(1)
	return nil
}
