package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// rawPublisher publishes the rows ours publishes, into the bench table or (job) the job table,
// by hand over the same database/sql pool type ours runs on, all or nothing, in one of these
// ways (-raw):
//
//   - chunks: the library's own multi-row INSERT (sqltext's Insert) of chunk rows a statement,
//     in one transaction where it takes more than one, as Enqueue runs its 1,000;
//   - unnest: one INSERT … SELECT FROM unnest($1::bytea[], …) on Postgres, each column's values
//     bound as one array ([][]byte, []string, …: pgx's stdlib driver takes them as they are);
//   - unnest-text: on the bench table, one INSERT … SELECT unnest($1::text::bytea[]), the
//     payloads bound as one text literal, which any driver binds;
//   - copy: pgx's CopyFrom on the connection under database/sql (Conn.Raw), one COPY statement.
type rawPublisher struct {
	way   string
	chunk int
	job   bool
	t     *harness.Target
	tbl   inbox.Table
	quote string // the table's quoted name
	s     sqltext.SQL
}

// rawTable and rawJobTable are the raw publishes' tables: a bench table and a job table.
const (
	rawTable    = "inbox_publish_raw"
	rawJobTable = "inbox_publish_raw_jobs"
)

func newRaw(ctx context.Context, db, dsn, way string, chunk int, job bool) (*rawPublisher, error) {
	t, err := harness.Open(ctx, db, dsn, 2)
	if err != nil {
		return nil, err
	}
	r := &rawPublisher{way: way, chunk: chunk, job: job, t: t, tbl: harness.Table(rawTable)}
	if job {
		r.tbl = jobTable(rawJobTable)
	}
	err = func() error {
		q, err := r.tbl.Quote(t.D)
		if err != nil {
			return err
		}
		r.quote, r.s = q.Name, sqltext.New(t.D.Caps(), sqltext.Table(q))
		if job {
			return createJobTable(ctx, t, r.tbl)
		}
		return t.CreateTable(ctx, rawTable)
	}()
	if err != nil {
		t.Close()
		return nil, err
	}
	return r, nil
}

func (r *rawPublisher) name() string {
	var s string
	switch r.way {
	case "chunks":
		s = fmt.Sprintf("raw: INSERT of %s rows a statement", harness.Thousands(float64(r.chunk)))
	case "unnest":
		s = "raw: INSERT … SELECT FROM unnest(arrays)"
	case "unnest-text":
		s = "raw: INSERT … SELECT unnest($1::text::bytea[])"
	default:
		s = "raw: COPY (pgx CopyFrom via Conn.Raw)"
	}
	if r.job {
		return s + ", job table"
	}
	return s + ", bench table"
}

func (r *rawPublisher) role() role { return rawRole }
func (r *rawPublisher) close()     { r.t.Close() }

func (r *rawPublisher) empty(ctx context.Context) error { return r.t.Empty(ctx, r.tbl.Name) }

func (r *rawPublisher) count(ctx context.Context) (int64, error) {
	return r.t.Remaining(ctx, r.tbl.Name)
}

func (r *rawPublisher) oneName() string { return "" }

func (r *rawPublisher) one(context.Context, int) error {
	return errors.New("raw publishers have no single-message call")
}

func (r *rawPublisher) prepare(from, rows int) func(ctx context.Context) error {
	payloads := make([][]byte, rows)
	for i := range payloads {
		payloads[i] = harness.Payload(from + i + 1)
	}
	switch r.way {
	case "unnest":
		return func(ctx context.Context) error { return r.unnest(ctx, payloads) }
	case "unnest-text":
		return func(ctx context.Context) error {
			_, err := r.t.DB.ExecContext(ctx, "INSERT INTO "+r.quote+" (payload) SELECT unnest($1::text::bytea[])", byteaArray(payloads))
			return err
		}
	case "copy":
		return func(ctx context.Context) error { return r.copy(ctx, payloads) }
	}
	return func(ctx context.Context) error { return r.chunks(ctx, payloads) }
}

// byteaArray is payloads as a Postgres array literal of bytea in hex, built at the call as a
// library would.
func byteaArray(payloads [][]byte) string {
	var b strings.Builder
	b.WriteByte('{')
	for i, p := range payloads {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"\\x`)
		b.WriteString(hex.EncodeToString(p))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

// chunks inserts payloads chunk rows a statement, in one transaction where there are several.
func (r *rawPublisher) chunks(ctx context.Context, payloads [][]byte) error {
	type execer interface {
		ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	}
	var ex execer = r.t.DB
	var tx *sql.Tx
	if len(payloads) > r.chunk {
		var err error
		if tx, err = r.t.DB.BeginTx(ctx, nil); err != nil {
			return err
		}
		defer tx.Rollback()
		ex = tx
	}
	now := r.t.D.Time(time.Now())
	for from := 0; from < len(payloads); from += r.chunk {
		part := payloads[from:min(from+r.chunk, len(payloads))]
		args := make([]any, 0, len(part)*r.columns())
		for _, p := range part {
			args = append(args, p)
			if r.job {
				// As Enqueue binds the job table's row: payload, queue, kind, priority,
				// retry_after, created_at.
				args = append(args, "default", "bench", 1, nil, now)
			}
		}
		if _, err := ex.ExecContext(ctx, r.s.Insert(len(part), nil), args...); err != nil {
			return err
		}
	}
	if tx != nil {
		return tx.Commit()
	}
	return nil
}

// columns are the values a row binds in the library's INSERT.
func (r *rawPublisher) columns() int {
	if r.job {
		return 6
	}
	return 1
}

// unnest inserts payloads by one INSERT … SELECT FROM unnest of an array per column.
func (r *rawPublisher) unnest(ctx context.Context, payloads [][]byte) error {
	if !r.job {
		_, err := r.t.DB.ExecContext(ctx, "INSERT INTO "+r.quote+" (payload) SELECT unnest($1::bytea[])", payloads)
		return err
	}
	queues, kinds, priorities, created := make([]string, len(payloads)), make([]string, len(payloads)), make([]int32, len(payloads)), make([]time.Time, len(payloads))
	now := time.Now()
	for i := range payloads {
		queues[i], kinds[i], priorities[i], created[i] = "default", "bench", 1, now
	}
	_, err := r.t.DB.ExecContext(ctx, "INSERT INTO "+r.quote+" (payload, queue, kind, priority, created_at) "+
		"SELECT * FROM unnest($1::bytea[], $2::text[], $3::text[], $4::int[], $5::timestamptz[])", payloads, queues, kinds, priorities, created)
	return err
}

// copy COPYs payloads into the table on one of the pool's connections, through pgx under
// database/sql: one statement, all or nothing.
func (r *rawPublisher) copy(ctx context.Context, payloads [][]byte) error {
	conn, err := r.t.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	rows := make([][]any, len(payloads))
	columns := []string{"payload"}
	if r.job {
		columns = append(columns, "queue", "kind", "priority", "created_at")
	}
	now := time.Now()
	for i, p := range payloads {
		rows[i] = []any{p}
		if r.job {
			rows[i] = append(rows[i], "default", "bench", int32(1), now)
		}
	}
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("COPY needs pgx's stdlib driver, not %T", dc)
		}
		_, err := c.Conn().CopyFrom(ctx, pgx.Identifier{r.tbl.Name}, columns, pgx.CopyFromRows(rows))
		return err
	})
}
