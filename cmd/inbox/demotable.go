package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/sqlinbox/inbox/dialect"
)

// A demoOwned is the demo's table, which the demo treats as its own only when it made it: it
// creates the table only where nothing of its name exists, marks it as the demo's, and drops it
// only while it carries the mark of the run that created it. A table of that name without the
// mark is left alone, whatever it holds; one with the mark of an earlier run is what a demo that
// did not end (killed, say) left behind, and is replaced.
//
// The mark is the table's comment (Postgres COMMENT ON TABLE, MySQL and MariaDB COMMENT=), and
// on SQLite, which has no table comments, an SQL comment in the CREATE TABLE statement, which
// SQLite keeps as written in sqlite_schema. So the mark lives and dies with the table, needs no
// second table to clean up, and shows where anyone looks at the table (\d+, SHOW CREATE TABLE,
// .schema).
type demoOwned struct {
	db     *sql.DB
	d      dialect.Runtime
	name   string
	quoted string
	run    string // this run's id, in its mark
	mark   string
}

// markPrefix starts every mark; the run's id follows it, up to a comma.
const markPrefix = "inbox demo run "

func newDemoOwned(db *sql.DB, d dialect.Runtime, name string) (*demoOwned, error) {
	quoted, err := d.Quote(name)
	if err != nil {
		return nil, usagef("-table %q: %v", name, err)
	}
	run := rand.Text()[:12]
	return &demoOwned{
		db: db, d: d, name: name, quoted: quoted, run: run,
		mark: fmt.Sprintf("%s%s, created %s by inbox demo, which drops it when it ends", markPrefix, run, time.Now().UTC().Format(time.RFC3339)),
	}, nil
}

// runOf returns the run id a mark names, or "" when it is not a mark of the demo's.
func runOf(mark string) string {
	rest, ok := strings.CutPrefix(mark, markPrefix)
	if !ok {
		return ""
	}
	run, _, _ := strings.Cut(rest, ",")
	return run
}

// lookup tells whether the database has a table (or anything else its CREATE TABLE would clash
// with) of the demo's table's name, and the mark it carries ("" for none).
func (o *demoOwned) lookup(ctx context.Context) (exists bool, mark string, err error) {
	var rows *sql.Rows
	switch o.d.Caps().Catalog {
	case dialect.PostgresCatalog:
		// to_regclass resolves the name as the unqualified CREATE TABLE and DROP TABLE do, along
		// the search path; it finds views, sequences and indexes too.
		rows, err = o.db.QueryContext(ctx, `SELECT COALESCE(obj_description(to_regclass($1), 'pg_class'), '') WHERE to_regclass($1) IS NOT NULL`, o.quoted)
	case dialect.SQLiteCatalog:
		rows, err = o.db.QueryContext(ctx, `SELECT COALESCE(sql, '') FROM sqlite_master WHERE name = ? COLLATE NOCASE`, o.name)
	default:
		rows, err = o.db.QueryContext(ctx, `SELECT table_comment FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name = ?`, o.name)
	}
	if err != nil {
		return false, "", err
	}
	defer rows.Close()
	for rows.Next() {
		var text string
		if err := rows.Scan(&text); err != nil {
			return false, "", err
		}
		exists = true
		if o.d.Caps().Catalog == dialect.SQLiteCatalog {
			if _, after, ok := strings.Cut(text, "-- "+markPrefix); ok {
				line, _, _ := strings.Cut(after, "\n")
				text = markPrefix + line
			}
		}
		if runOf(text) != "" {
			mark = text
		}
	}
	return exists, mark, rows.Err()
}

// create creates the demo's table with this run's mark, and says so on w. A table of the name
// that the demo did not create is refused; one an earlier demo left is dropped first.
func (o *demoOwned) create(ctx context.Context, w io.Writer, where string) error {
	exists, mark, err := o.lookup(ctx)
	if err != nil {
		return fmt.Errorf("looking for table %s in %s: %w", o.name, where, err)
	}
	switch {
	case exists && mark == "":
		return fmt.Errorf("table %s exists in %s, and the demo did not create it (it has no mark of the demo's): the demo leaves it alone; name another table with -table, or drop it yourself", o.name, where)
	case exists:
		fmt.Fprintf(w, "table     %s was left by an earlier demo (%q): dropping it\n", o.name, mark)
		if _, err := o.db.ExecContext(ctx, "DROP TABLE "+o.quoted); err != nil {
			return fmt.Errorf("dropping the earlier demo's table %s: %w", o.name, err)
		}
	}
	fmt.Fprintf(w, "table     %s: creating it in %s, marked as the demo's, to be dropped when the demo ends\n", o.name, where)
	if err := o.createMarked(ctx); err != nil {
		return fmt.Errorf("creating table %s: %w", o.name, err)
	}
	return nil
}

// createMarked creates the table with its mark in one statement, or, on Postgres, in one
// transaction, so that the table never exists without it.
func (o *demoOwned) createMarked(ctx context.Context) error {
	literal := "'" + strings.ReplaceAll(o.mark, "'", "''") + "'"
	switch o.d.Caps().Catalog {
	case dialect.PostgresCatalog:
		tx, err := o.db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer tx.Rollback()
		if _, err := tx.ExecContext(ctx, `CREATE TABLE `+o.quoted+` (id BIGSERIAL PRIMARY KEY, payload BYTEA,
			attempt INT NOT NULL DEFAULT 0, processed_at TIMESTAMPTZ, priority INT NOT NULL DEFAULT 0,
			retry_after TIMESTAMPTZ, locked_until TIMESTAMPTZ)`); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `COMMENT ON TABLE `+o.quoted+` IS `+literal); err != nil {
			return err
		}
		return tx.Commit()
	case dialect.SQLiteCatalog:
		_, err := o.db.ExecContext(ctx, `CREATE TABLE `+o.quoted+` ( -- `+o.mark+`
			id INTEGER PRIMARY KEY, payload BLOB, attempt INTEGER NOT NULL DEFAULT 0, processed_at TEXT,
			priority INTEGER NOT NULL DEFAULT 0, retry_after TEXT, locked_until TEXT)`)
		return err
	default:
		_, err := o.db.ExecContext(ctx, `CREATE TABLE `+o.quoted+` (id BIGINT AUTO_INCREMENT PRIMARY KEY,
			payload LONGBLOB, attempt INT NOT NULL DEFAULT 0, processed_at DATETIME(6) NULL,
			priority INT NOT NULL DEFAULT 0, retry_after DATETIME(6) NULL, locked_until DATETIME(6) NULL,
			INDEX claim_order (processed_at, priority, retry_after, id)) COMMENT = `+literal)
		return err
	}
}

// errNotOurs is a table the demo will not drop: it no longer carries this run's mark.
var errNotOurs = errors.New("no longer the table this demo created")

// drop drops the demo's table if it still carries this run's mark, and says so on w.
func (o *demoOwned) drop(ctx context.Context, w io.Writer) error {
	exists, mark, err := o.lookup(ctx)
	if err != nil {
		return fmt.Errorf("looking for table %s before dropping it: %w", o.name, err)
	}
	if !exists {
		return nil
	}
	if runOf(mark) != o.run {
		return fmt.Errorf("table %s: %w (its mark: %q): leaving it alone", o.name, errNotOurs, mark)
	}
	if _, err := o.db.ExecContext(ctx, "DROP TABLE "+o.quoted); err != nil {
		return fmt.Errorf("dropping table %s: %w", o.name, err)
	}
	fmt.Fprintf(w, "dropped   table %s\n", o.name)
	return nil
}
