package integration

import (
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// schemaColumns are the columns of fullTable with the lease column, in the order schemaCreate
// declares them.
var schemaColumns = []string{"id", "payload", "attempt", "processed_at", "grp", "priority", "retry_after", "headers", "locked_until"}

// schemaTypes are the column types createTable gives fullTable's columns on b, by column, for a
// test to change some.
func schemaTypes(b backend) map[string]string {
	ty := b.columnTypes()
	return map[string]string{
		"id": ty.id, "payload": ty.payload, "attempt": ty.number, "processed_at": ty.time, "grp": ty.queue,
		"priority": ty.number, "retry_after": ty.time, "headers": ty.text, "locked_until": ty.time,
	}
}

// schemaCreate creates (anew) table name with fullTable's columns, typed as schemaTypes says
// but for the types in change, and drops it when the test ends. strict makes a SQLite table
// STRICT.
func schemaCreate(t *testing.T, b backend, db *sql.DB, name string, change map[string]string, strict bool) inbox.Table {
	t.Helper()
	types := schemaTypes(b)
	for col, typ := range change {
		types[col] = typ
	}
	cols := make([]string, len(schemaColumns))
	for i, c := range schemaColumns {
		cols[i] = b.q(t, c) + " " + types[c]
	}
	create := "CREATE TABLE " + b.q(t, name) + " (" + strings.Join(cols, ", ") + ")"
	if strict {
		create += " STRICT"
	}
	drop := "DROP TABLE IF EXISTS " + b.q(t, name)
	mustExec(t, db, drop)
	mustExec(t, db, create)
	t.Cleanup(func() { db.Exec(drop) })
	return fullTable(name)
}

// wrongType is a column given a type that breaks its role, per database: what it is declared
// as, and a fragment of the type the error must name as the column's.
type wrongType struct {
	column      string
	lease       bool // the lease column: only the lease form checks it
	strict      bool // SQLite: the table is STRICT (a plain table keeps the library's text in any column)
	decl, shown string
}

// wrongTypes lists, for backend b, a wrong type for every role.
func wrongTypes(b backend) []wrongType {
	switch b.name {
	case "postgres":
		return []wrongType{
			{column: "id", decl: "TEXT PRIMARY KEY", shown: "text"},
			{column: "payload", decl: "INTEGER", shown: "integer"},
			{column: "attempt", decl: "TEXT", shown: "text"},
			{column: "processed_at", decl: "TEXT", shown: "text"},
			{column: "grp", decl: "INTEGER", shown: "integer"},
			{column: "priority", decl: "TEXT", shown: "text"},
			{column: "retry_after", decl: "DATE", shown: "date"},
			{column: "headers", decl: "INTEGER", shown: "integer"},
			{column: "locked_until", lease: true, decl: "TIMESTAMPTZ(0)", shown: "timestamp(0) with time zone"},
			{column: "locked_until", lease: true, decl: "TIMESTAMPTZ(3)", shown: "timestamp(3) with time zone"},
			{column: "locked_until", lease: true, decl: "TIMESTAMP(0)", shown: "timestamp(0) without time zone"},
			{column: "locked_until", lease: true, decl: "TEXT", shown: "text"},
		}
	case "sqlite":
		return []wrongType{
			{column: "id", decl: "TEXT PRIMARY KEY", shown: "TEXT"},
			{column: "payload", decl: "INTEGER", shown: "INTEGER"},
			{column: "attempt", decl: "TEXT", shown: "TEXT"},
			{column: "processed_at", strict: true, decl: "INTEGER", shown: "INTEGER"},
			{column: "grp", decl: "INTEGER", shown: "INTEGER"},
			{column: "priority", decl: "TEXT", shown: "TEXT"},
			{column: "retry_after", strict: true, decl: "REAL", shown: "REAL"},
			{column: "headers", strict: true, decl: "INTEGER", shown: "INTEGER"},
			{column: "locked_until", lease: true, strict: true, decl: "INTEGER", shown: "INTEGER"},
		}
	}
	return []wrongType{
		{column: "id", decl: "VARCHAR(20) PRIMARY KEY", shown: "varchar(20)"},
		{column: "payload", decl: "INT", shown: "int"},
		{column: "attempt", decl: "VARCHAR(10)", shown: "varchar(10)"},
		{column: "processed_at", decl: "VARCHAR(40)", shown: "varchar(40)"},
		{column: "grp", decl: "INT", shown: "int"},
		{column: "priority", decl: "VARCHAR(10)", shown: "varchar(10)"},
		{column: "retry_after", decl: "VARCHAR(40)", shown: "varchar(40)"},
		{column: "headers", decl: "INT", shown: "int"},
		{column: "locked_until", lease: true, decl: "DATETIME NULL", shown: "datetime"},
		{column: "locked_until", lease: true, decl: "DATETIME(3) NULL", shown: "datetime(3)"},
		{column: "locked_until", lease: true, decl: "VARCHAR(40)", shown: "varchar(40)"},
	}
}

// fixStatement is the statement an Open error gives to fix a column: its text from ALTER TABLE
// to the end of its line.
var fixStatement = regexp.MustCompile(`ALTER TABLE [^\n]*`)

// TestSchemaRefusesWrongTypes: a column whose type breaks its role (a TEXT id, an integer
// group, a lease column without microseconds, …) fails Open with ErrSchema naming the table,
// the column, the type it has and the statement that fixes it; after that statement Open
// succeeds, and on Postgres and MySQL a lease column so fixed settles a claimed row.
func TestSchemaRefusesWrongTypes(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		db := c.b.open(t, 4)
		for _, w := range wrongTypes(c.b) {
			if w.lease && c.form != "lease" {
				continue
			}
			t.Run(w.column+"-"+strings.Fields(w.decl)[0], func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				tbl := schemaCreate(t, c.b, db, tableName(t), map[string]string{w.column: w.decl}, w.strict)
				if w.column == "id" {
					tbl.IDGenerated = false
				}
				f := c.newForm(t, tbl)
				_, err := f.Open(ctx, db, inbox.Binding{Name: "q"})
				if err == nil {
					f.Close()
					t.Fatalf("Open accepted column %q declared %s", w.column, w.decl)
				}
				msg := err.Error()
				t.Log(msg)
				if !errors.Is(err, inbox.ErrSchema) {
					t.Fatalf("Open: %v, want an error wrapping ErrSchema", err)
				}
				for _, want := range []string{tbl.Name, `"` + w.column + `"`, w.shown} {
					if !strings.Contains(msg, want) {
						t.Errorf("Open: %v: does not name %q", err, want)
					}
				}
				if c.b.name == "sqlite" {
					if !strings.Contains(msg, "rebuild the table") {
						t.Errorf("Open: %v: does not say the SQLite table must be rebuilt", err)
					}
					return
				}
				fix := fixStatement.FindString(msg)
				if fix == "" {
					t.Fatalf("Open: %v: names no ALTER TABLE that fixes the column", err)
				}
				if _, err := db.ExecContext(ctx, fix); err != nil {
					t.Fatalf("the fix the error gives, %s: %v", fix, err)
				}
				f = c.newForm(t, tbl)
				if _, err := f.Open(ctx, db, inbox.Binding{Name: "q"}); err != nil {
					t.Fatalf("Open after %s: %v", fix, err)
				}
				defer f.Close()
				if !w.lease {
					return
				}
				c.publish(t, db, tbl, inbox.Message{Queue: "q", Payload: []byte("x")})
				ds, err := f.Claim(ctx, 1)
				if err != nil || len(ds) != 1 {
					t.Fatalf("Claim after the fix: %d rows, %v; want the row", len(ds), err)
				}
				if err := f.Settle(ctx, ds[0], outcome.Ack()); err != nil {
					t.Errorf("Settle after the fix: %v", err)
				}
			})
		}
	})
}

// TestNullAttemptReadsAsNeverDelivered: a row whose attempt is NULL (inserted by hand, into a
// column without NOT NULL) is claimed by every form, its first delivery reads 1 and the one
// after a retry 2, singly and in batches.
func TestNullAttemptReadsAsNeverDelivered(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		for _, batch := range []int{0, 4} {
			name := "single"
			if batch > 0 {
				name = "batch"
			}
			t.Run(name, func(t *testing.T) {
				db := c.b.open(t, 8)
				nullable := map[string]string{"attempt": "INT NULL"}
				tbl := schemaCreate(t, c.b, db, tableName(t), nullable, false)
				mustExec(t, db, "INSERT INTO "+c.q(t, tbl.Name)+" ("+c.q(t, tbl.Payload)+", "+c.q(t, tbl.Attempt)+", "+c.q(t, tbl.Queue)+") VALUES ("+c.ph(1)+", NULL, 'q')", []byte("x"))
				var (
					mu       sync.Mutex
					attempts []int
				)
				h := inbox.HandlerFunc(func(_ context.Context, d *inbox.Delivery) outcome.Outcome {
					mu.Lock()
					defer mu.Unlock()
					attempts = append(attempts, d.Attempt)
					if len(attempts) == 1 {
						return outcome.Retry()
					}
					return outcome.Ack()
				})
				cfg := &inbox.Config{Queue: "q", PollInterval: cellPoll, Logger: testLogger(t)}
				stop := startConsumer(t, newConsumer(t, db, c.newForm(t, tbl), batch, h, cfg))
				settled := func() bool {
					return len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) == 1
				}
				eventually(10*time.Second, settled)
				stop()
				mu.Lock()
				defer mu.Unlock()
				if !settled() {
					t.Errorf("the row with a NULL attempt was not settled within 10 s (deliveries read attempts %v)", attempts)
				} else if !slices.Equal(attempts, []int{1, 2}) {
					t.Errorf("deliveries read attempts %v, want [1 2]: a NULL attempt is a row never delivered", attempts)
				}
			})
		}
	})
}

// TestUnclaimableRowsAreReported: a consumer logs, once, the rows of its queue that no claim
// takes as they stand: a NULL queue, a retry_after more than a century ahead (Postgres:
// infinity too), and on SQLite a retry_after that is not a time in the library's layout. A row
// of another queue is not its to report, and a good row is consumed meanwhile.
func TestUnclaimableRowsAreReported(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		db := c.b.open(t, 8)
		group := map[string]string{"postgres": "TEXT NULL", "sqlite": "TEXT"}[c.b.name]
		if group == "" {
			group = "VARCHAR(191) NULL"
		}
		tbl := schemaCreate(t, c.b, db, tableName(t), map[string]string{"grp": group}, false)
		never := map[string]string{
			"postgres": "'9999-12-31 23:59:59+00'",
			"sqlite":   "'9999-12-31 23:59:59.000000'",
		}[c.b.name]
		if never == "" {
			never = "'9999-12-31 23:59:59'"
		}
		insert := func(grp, retryAfter string) int64 {
			t.Helper()
			before := c.ids(t, db, tbl, "")
			mustExec(t, db, "INSERT INTO "+c.q(t, tbl.Name)+" ("+c.q(t, tbl.Payload)+", "+c.q(t, tbl.Queue)+", "+c.q(t, tbl.RetryAfter)+") VALUES ("+c.ph(1)+", "+grp+", "+retryAfter+")", []byte("x"))
			after := c.ids(t, db, tbl, "")
			return after[len(before)]
		}
		good := insert("'q'", "NULL")
		want := map[string][]int64{
			"queue column": {insert("NULL", "NULL")},
			"100 years":    {insert("'q'", never)},
		}
		other := insert("'other'", never)
		switch c.b.name {
		case "postgres":
			want["100 years"] = append(want["100 years"], insert("'q'", "'infinity'"))
		case "sqlite":
			want["layout"] = []int64{insert("'q'", "'tomorrow'")}
		}
		logs := &inboxtest.Log{}
		stop := runConsumer(t, db, c.newForm(t, tbl), inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome {
			return outcome.Ack()
		}), &inbox.Config{Queue: "q", Logger: logs.Logger(slog.LevelInfo)})
		reports := func(why string) []string {
			var out []string
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "no claim will take") && strings.Contains(line, why) {
					out = append(out, line)
				}
			}
			return out
		}
		waitFor(t, 20*time.Second, "the good row to be acked and every kind of unclaimable row reported", func() bool {
			if len(c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL")) != 1 {
				return false
			}
			for why := range want {
				if len(reports(why)) == 0 {
					return false
				}
			}
			return true
		})
		time.Sleep(20 * cellPoll) // many polls: the report is not repeated per poll
		stop()
		if got := c.ids(t, db, tbl, c.q(t, tbl.ProcessedAt)+" IS NOT NULL"); !slices.Equal(got, []int64{good}) {
			t.Errorf("rows settled: %v, want the good row %d only", got, good)
		}
		for why, ids := range want {
			lines := reports(why)
			if len(lines) != 1 {
				t.Errorf("%q reported %d times, want once:\n%s", why, len(lines), strings.Join(lines, "\n"))
				continue
			}
			if got := reportedIDs(lines[0]); !slices.Equal(got, ids) {
				t.Errorf("the report names rows %v, want %v (not row %d of queue other): %s", got, ids, other, lines[0])
			}
			if !strings.Contains(lines[0]+" ", " rows="+strconv.Itoa(len(ids))+" ") {
				t.Errorf("the report does not count %d rows: %s", len(ids), lines[0])
			}
		}
	})
}

// reportedIDs reads the ids attribute of a log line: ids=[3] or ids="[3 4]".
func reportedIDs(line string) []int64 {
	m := regexp.MustCompile(`ids="?\[([0-9 ]*)\]`).FindStringSubmatch(line)
	if m == nil {
		return nil
	}
	var out []int64
	for _, f := range strings.Fields(m[1]) {
		n, _ := strconv.ParseInt(f, 10, 64)
		out = append(out, n)
	}
	return out
}

// TestSchemaSQLiteKeepsTheLibrarysTextInAnyColumn: outside a STRICT table, a timestamp or lease
// column declared DATETIME, INTEGER, REAL, NUMERIC or with no type (NUMERIC, INTEGER, REAL and
// BLOB affinity) keeps the library's text exactly, since no affinity converts text that does
// not read as a number. Open accepts such a table, and a claim, an extension, a RetryAfter and
// an Ack each find the token they wrote.
func TestSchemaSQLiteKeepsTheLibrarysTextInAnyColumn(t *testing.T) {
	b := backends(t, true)[3]
	for _, decl := range []string{"DATETIME", "INTEGER", "REAL", "NUMERIC", ""} {
		t.Run("declared-"+decl, func(t *testing.T) {
			ctx := context.Background()
			db := b.open(t, 4)
			typed := map[string]string{"processed_at": decl, "retry_after": decl, "locked_until": decl, "headers": decl}
			tbl := schemaCreate(t, b, db, tableName(t), typed, false)
			b.enqueue(t, db, tbl, inbox.Message{Queue: "q", Payload: []byte("x"), Headers: map[string]string{"k": "v"}})
			f := leaseForm(t, b, db, tbl, nil, inbox.Binding{Name: "q"})
			stored := func(col string) (kind, text string) {
				t.Helper()
				err := db.QueryRowContext(ctx, "SELECT typeof("+col+"), CAST("+col+" AS TEXT) FROM "+tbl.Name).Scan(&kind, &text)
				if err != nil {
					t.Fatal(err)
				}
				return kind, text
			}
			layout := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}$`)
			check := func(col string) {
				t.Helper()
				if kind, text := stored(col); kind != "text" || !layout.MatchString(text) {
					t.Errorf("%s declared %q holds %s %q, want the library's text", col, decl, kind, text)
				}
			}

			ds := claimN(t, f, 1, 1)
			if ds[0].Headers["k"] != "v" {
				t.Errorf("headers read back as %v, want k=v", ds[0].Headers)
			}
			check("locked_until")
			if err := f.Extend(ctx, ds[0]); err != nil {
				t.Fatalf("Extend: %v", err)
			}
			if err := f.Settle(ctx, ds[0], outcome.RetryAfter(time.Millisecond)); err != nil {
				t.Fatalf("Settle RetryAfter: %v", err)
			}
			check("retry_after")
			time.Sleep(10 * time.Millisecond)
			ds = claimN(t, f, 1, 1)
			if err := f.Settle(ctx, ds[0], outcome.Ack()); err != nil {
				t.Fatalf("Settle Ack: %v", err)
			}
			check("processed_at")
		})
	}
}
