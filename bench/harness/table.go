package harness

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// LeaseColumn is the bench table's lease column, which every bench table has (only the lease
// form uses it).
const LeaseColumn = "locked_until"

// Table describes a bench table called name: a generated id, a payload and an attempt counter
// (and LeaseColumn); no group, priority, retry_after or processed_at column, so Ack deletes the
// row and a claim takes the rows in id order.
func Table(name string) inbox.Table {
	return inbox.Table{Name: name, ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt"}
}

// HistoryColumn and QueueColumn are the processed_at and queue columns of a bench table that
// keeps its processed rows (Consumer.History) or holds several queues (Consumer.Queue).
const (
	HistoryColumn = "processed_at"
	QueueColumn   = "queue"
)

// table is the bench table c drains.
func (c Consumer) table() inbox.Table {
	tbl := Table(c.Table)
	if c.History {
		tbl.ProcessedAt = HistoryColumn
	}
	if c.Queue != "" {
		tbl.Queue = QueueColumn
	}
	if c.Kinds > 0 {
		tbl.Kind = KindColumn
	}
	if c.Groups {
		tbl.GroupKey = GroupColumn
	}
	if c.Limits {
		tbl.Limits = inbox.LimitsTable
	}
	return tbl
}

// CreateLimitTables creates the limits' tables (inbox_limits, inbox_slots) where they are not
// there, and clears the limits and slots of the bench table called name, for consumers of
// limits (Consumer.Limits).
func (t *Target) CreateLimitTables(ctx context.Context, name string) error {
	tbl := Table(name)
	tbl.Limits = inbox.LimitsTable
	stmts, err := inbox.LimitsSchema(t.D, tbl)
	if err != nil {
		return err
	}
	for _, side := range []string{inbox.LimitsTable, sqltext.SlotsTable} {
		stmts = append(stmts, "DELETE FROM "+side+" WHERE table_name = '"+name+"'")
	}
	for _, st := range stmts {
		if _, err := t.DB.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("%s: %s: %w", t.Name, st, err)
		}
	}
	return nil
}

// SetLimit sets the limit of the one queue of the bench table called name to max rows in work
// (inbox.Client.SetLimit).
func (t *Target) SetLimit(ctx context.Context, name string, max int) error {
	tbl := Table(name)
	tbl.Limits = inbox.LimitsTable
	c, err := inbox.NewClient(t.DB, t.D, tbl)
	if err != nil {
		return err
	}
	return c.SetLimit(ctx, inbox.Limit{Scope: inbox.LimitPerQueue, Max: max})
}

// GroupColumn is the FIFO group column of a bench table made by CreateGroupTable.
const GroupColumn = "group_key"

// CreateGroupTable drops and creates the bench table called name with a group column as well,
// its group index (group, id) and the group holds' table, for consumers of groups
// (Consumer.Groups) and, over the same rows, consumers that ignore the column.
func (t *Target) CreateGroupTable(ctx context.Context, name string) error {
	if err := t.CreateTable(ctx, name); err != nil {
		return err
	}
	q, err := t.D.Quote(name)
	if err != nil {
		return err
	}
	typ := "VARCHAR(191) NULL"
	if t.Name == "sqlite" {
		typ = "TEXT"
	}
	index, err := t.D.Quote(name + "_group")
	if err != nil {
		return err
	}
	for _, st := range []string{
		"ALTER TABLE " + q + " ADD COLUMN " + GroupColumn + " " + typ,
		"CREATE INDEX " + index + " ON " + q + " (" + GroupColumn + ", id)",
		sqltext.CreateGroups(t.D.Caps()),
	} {
		if _, err := t.DB.ExecContext(ctx, st); err != nil {
			return fmt.Errorf("%s: %s: %w", t.Name, st, err)
		}
	}
	return nil
}

// SetGroups spreads the rows of the bench table called name over n groups (g0 to g{n-1}, by
// id), after Prefill.
func (t *Target) SetGroups(ctx context.Context, name string, n int) error {
	q, err := t.D.Quote(name)
	if err != nil {
		return err
	}
	group := "'g' || (id % " + strconv.Itoa(n) + ")"
	if t.Name == "mysql" || t.Name == "mariadb" {
		group = "CONCAT('g', id % " + strconv.Itoa(n) + ")"
	}
	if _, err := t.DB.ExecContext(ctx, "UPDATE "+q+" SET "+GroupColumn+" = "+group); err != nil {
		return fmt.Errorf("%s: setting the groups of %s: %w", t.Name, name, err)
	}
	return t.Analyze(ctx, name)
}

// KindColumn is the kind column of a bench table made by CreateKindTable.
const KindColumn = "kind"

// CreateKindTable drops and creates the bench table called name with a kind column as well,
// for consumers of kinds (Consumer.Kinds) and, over the same rows, consumers of every row.
func (t *Target) CreateKindTable(ctx context.Context, name string) error {
	if err := t.CreateTable(ctx, name); err != nil {
		return err
	}
	q, err := t.D.Quote(name)
	if err != nil {
		return err
	}
	typ := "TEXT NOT NULL DEFAULT ''"
	if t.Name == "mysql" || t.Name == "mariadb" {
		typ = "VARCHAR(191) NOT NULL DEFAULT ''"
	}
	if _, err := t.DB.ExecContext(ctx, "ALTER TABLE "+q+" ADD COLUMN "+KindColumn+" "+typ); err != nil {
		return fmt.Errorf("%s: adding the kind column to %s: %w", t.Name, name, err)
	}
	return nil
}

// SetKinds spreads the rows of the bench table called name over n kinds (kind_0 to
// kind_{n-1}, by id), after Prefill.
func (t *Target) SetKinds(ctx context.Context, name string, n int) error {
	q, err := t.D.Quote(name)
	if err != nil {
		return err
	}
	kind := "'kind_' || (id % " + strconv.Itoa(n) + ")"
	if t.Name == "mysql" || t.Name == "mariadb" {
		kind = "CONCAT('kind_', id % " + strconv.Itoa(n) + ")"
	}
	if _, err := t.DB.ExecContext(ctx, "UPDATE "+q+" SET "+KindColumn+" = "+kind); err != nil {
		return fmt.Errorf("%s: setting the kinds of %s: %w", t.Name, name, err)
	}
	return t.Analyze(ctx, name)
}

// left counts the rows of c's table that c's consumer has still to settle: those of its queue
// not yet stamped processed.
func (c Consumer) left(ctx context.Context, t *Target) (int64, error) {
	q, err := t.D.Quote(c.Table)
	if err != nil {
		return 0, err
	}
	query, args := "SELECT COUNT(*) FROM "+q+" WHERE 1 = 1", []any{}
	if c.History {
		query += " AND " + HistoryColumn + " IS NULL"
	}
	if c.Queue != "" {
		query += " AND " + QueueColumn + " = " + t.D.Placeholder(1)
		args = append(args, c.Queue)
	}
	var n int64
	err = t.DB.QueryRowContext(ctx, query, args...).Scan(&n)
	return n, err
}

// CreateTable drops and creates the bench table called name.
func (t *Target) CreateTable(ctx context.Context, name string) error {
	q, err := t.D.Quote(name)
	if err != nil {
		return err
	}
	var columns string
	switch t.Name {
	case "postgres":
		columns = "(id BIGSERIAL PRIMARY KEY, payload BYTEA, attempt INT NOT NULL DEFAULT 0, locked_until TIMESTAMPTZ)"
	case "sqlite":
		columns = "(id INTEGER PRIMARY KEY, payload BLOB, attempt INTEGER NOT NULL DEFAULT 0, locked_until TEXT)"
	default:
		columns = "(id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, attempt INT NOT NULL DEFAULT 0, locked_until DATETIME(6) NULL)"
	}
	for _, s := range []string{"DROP TABLE IF EXISTS " + q, "CREATE TABLE " + q + " " + columns} {
		if _, err := t.DB.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("%s: creating table %s: %w", t.Name, name, err)
		}
	}
	return nil
}

// Payload is row seq's payload: small JSON, as an application would publish. Every contender
// drains the same.
func Payload(seq int) []byte {
	return []byte(`{"seq":` + strconv.Itoa(seq) + `,"account":"acct-` + strconv.Itoa(seq%50) + `","amount_cents":` + strconv.Itoa(100+seq%9900) + `}`)
}

// Seq reads the seq of a payload written by Payload; 0 for any other.
func Seq(payload []byte) int {
	rest, ok := bytes.CutPrefix(payload, []byte(`{"seq":`))
	if !ok {
		return 0
	}
	digits, _, _ := bytes.Cut(rest, []byte(","))
	seq, _ := strconv.Atoi(string(digits))
	return seq
}

// Prefill empties the bench table called name and inserts n rows (Payload(1) to Payload(n)) in
// one transaction, a thousand per statement, then has the database analyze the table. It keeps
// no more than one statement's rows in memory, so a million rows cost what a thousand do.
func (t *Target) Prefill(ctx context.Context, name string, n int) error {
	q, err := t.D.Quote(name)
	if err != nil {
		return err
	}
	if err := t.Empty(ctx, name); err != nil {
		return err
	}
	tx, err := t.DB.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	const chunk = 1000
	for from := 0; from < n; from += chunk {
		rows := min(chunk, n-from)
		var b strings.Builder
		b.WriteString("INSERT INTO " + q + " (payload) VALUES ")
		args := make([]any, rows)
		for i := range rows {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("(" + t.D.Placeholder(i+1) + ")")
			args[i] = Payload(from + i + 1)
		}
		if _, err := tx.ExecContext(ctx, b.String(), args...); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	return t.Analyze(ctx, name)
}

// Empty deletes every row of the table called name.
func (t *Target) Empty(ctx context.Context, name string) error {
	q, err := t.D.Quote(name)
	if err != nil {
		return err
	}
	s := "TRUNCATE TABLE " + q
	if t.Name == "sqlite" {
		s = "DELETE FROM " + q
	}
	_, err = t.DB.ExecContext(ctx, s)
	return err
}

// Analyze has the database update the statistics of the table called name.
func (t *Target) Analyze(ctx context.Context, name string) error {
	q, err := t.D.Quote(name)
	if err != nil {
		return err
	}
	s := "ANALYZE " + q
	if t.Name == "mysql" || t.Name == "mariadb" {
		s = "ANALYZE TABLE " + q
	}
	rows, err := t.DB.QueryContext(ctx, s) // MySQL answers ANALYZE TABLE with a result set
	if err != nil {
		return err
	}
	return rows.Close()
}

// Remaining counts the rows left in the table called name.
func (t *Target) Remaining(ctx context.Context, name string) (int64, error) {
	q, err := t.D.Quote(name)
	if err != nil {
		return 0, err
	}
	var n int64
	err = t.DB.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+q).Scan(&n)
	return n, err
}

// CheckDrained fails a drain of the table called name that left rows in it or handled other
// than want rows.
func (t *Target) CheckDrained(ctx context.Context, name string, handled, want int64) error {
	left, err := t.Remaining(ctx, name)
	if err != nil {
		return err
	}
	return Check(name, left, handled, want)
}

// CheckError is a drain that ended with rows left or rows handled twice: the round is not
// counted, and the run goes on.
type CheckError struct{ msg string }

func (e *CheckError) Error() string { return e.msg }

// Check fails a drain that left rows in where, or whose handlers ran other than want rows
// (handled above want: rows handled twice).
func Check(where string, left, handled, want int64) error {
	if left != 0 || handled != want {
		return &CheckError{fmt.Sprintf("drain check failed: %d rows left in %s, %d handled of %d", left, where, handled, want)}
	}
	return nil
}
