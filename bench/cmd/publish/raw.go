package main

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/sqlinbox/inbox/bench/harness"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// rawPublisher publishes the bench table's rows by hand over the same database/sql pool type
// ours runs on, all or nothing, in one of these ways (-raw):
//
//   - chunks: the library's own multi-row INSERT (sqltext's Insert) of chunk rows a statement,
//     in one transaction where it takes more than one, as Enqueue runs its 1,000;
//   - unnest: one INSERT … SELECT unnest($1::bytea[]) on Postgres, the rows' payloads bound as
//     one [][]byte (pgx's stdlib driver takes it as is);
//   - unnest-text: the same with the array bound as one text literal, which any driver binds;
//   - copy: pgx's CopyFrom on the connection under database/sql (Conn.Raw), one COPY statement.
type rawPublisher struct {
	way   string
	chunk int
	t     *harness.Target
	table string
	quote string // the table's quoted name
	s     sqltext.SQL
}

// rawTable is the raw publishes' bench table.
const rawTable = "inbox_publish_raw"

func newRaw(ctx context.Context, db, dsn, way string, chunk int) (*rawPublisher, error) {
	t, err := harness.Open(ctx, db, dsn, 2)
	if err != nil {
		return nil, err
	}
	r := &rawPublisher{way: way, chunk: chunk, t: t, table: rawTable}
	err = func() error {
		tbl, err := harness.Table(rawTable).Quote(t.D)
		if err != nil {
			return err
		}
		r.quote, r.s = tbl.Name, sqltext.New(t.D.Caps(), sqltext.Table(tbl))
		return t.CreateTable(ctx, rawTable)
	}()
	if err != nil {
		t.Close()
		return nil, err
	}
	return r, nil
}

func (r *rawPublisher) name() string {
	switch r.way {
	case "chunks":
		return fmt.Sprintf("raw: INSERT of %s rows a statement", harness.Thousands(float64(r.chunk)))
	case "unnest":
		return "raw: INSERT … SELECT unnest($1::bytea[])"
	case "unnest-text":
		return "raw: INSERT … SELECT unnest($1::text::bytea[])"
	}
	return "raw: COPY (pgx CopyFrom via Conn.Raw)"
}

func (r *rawPublisher) role() role { return rawRole }
func (r *rawPublisher) close()     { r.t.Close() }

func (r *rawPublisher) empty(ctx context.Context) error { return r.t.Empty(ctx, r.table) }

func (r *rawPublisher) count(ctx context.Context) (int64, error) {
	return r.t.Remaining(ctx, r.table)
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
		return func(ctx context.Context) error {
			_, err := r.t.DB.ExecContext(ctx, "INSERT INTO "+r.quote+" (payload) SELECT unnest($1::bytea[])", payloads)
			return err
		}
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
	for from := 0; from < len(payloads); from += r.chunk {
		part := payloads[from:min(from+r.chunk, len(payloads))]
		args := make([]any, len(part))
		for i, p := range part {
			args[i] = p
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

// copy COPYs payloads into the table on one of the pool's connections, through pgx under
// database/sql: one statement, all or nothing.
func (r *rawPublisher) copy(ctx context.Context, payloads [][]byte) error {
	conn, err := r.t.DB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	rows := make([][]any, len(payloads))
	for i, p := range payloads {
		rows[i] = []any{p}
	}
	return conn.Raw(func(dc any) error {
		c, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("COPY needs pgx's stdlib driver, not %T", dc)
		}
		_, err := c.Conn().CopyFrom(ctx, pgx.Identifier{r.table}, []string{"payload"}, pgx.CopyFromRows(rows))
		return err
	})
}
