package main

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"

	"github.com/sqlinbox/inbox/bench/harness"
)

// handRowLock is the row lock loop a user would write by hand with database/sql, with
// -hand-rowlock in the place of the form's statements: a transaction at the server's default
// level (db.BeginTx with no options: REPEATABLE READ on MySQL and MariaDB, READ COMMITTED on
// Postgres), the claim and the DELETE written for the bench table and prepared once on the pool,
// each row deleted on its id, then COMMIT. Its SQL is its own, not internal/sqltext's.
type handRowLock struct {
	db         *sql.DB
	claim, del *sql.Stmt
}

func newHandRowLock(ctx context.Context, t *harness.Target, table string, batch int) (*handRowLock, error) {
	q, err := t.D.Quote(table)
	if err != nil {
		return nil, err
	}
	param := "?"
	if t.Name == "postgres" {
		param = "$1"
	}
	l := &handRowLock{db: t.DB}
	if l.claim, err = t.DB.PrepareContext(ctx, "SELECT id, payload FROM "+q+" ORDER BY id LIMIT "+strconv.Itoa(batch)+" FOR UPDATE SKIP LOCKED"); err != nil {
		return nil, fmt.Errorf("preparing the hand-written claim: %w", err)
	}
	if l.del, err = t.DB.PrepareContext(ctx, "DELETE FROM "+q+" WHERE id = "+param); err != nil {
		l.claim.Close()
		return nil, fmt.Errorf("preparing the hand-written DELETE: %w", err)
	}
	return l, nil
}

func (l *handRowLock) step(ctx context.Context, _ int, handle func()) (int, error) {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	ids, err := claimedIDs(tx.StmtContext(ctx, l.claim).QueryContext(ctx))
	if err != nil {
		return 0, err
	}
	if len(ids) == 0 {
		return 0, nil
	}
	del := tx.StmtContext(ctx, l.del)
	for _, id := range ids {
		handle()
		if _, err := del.ExecContext(ctx, id); err != nil {
			return 0, err
		}
	}
	return len(ids), tx.Commit()
}

func (l *handRowLock) close() {
	l.claim.Close()
	l.del.Close()
}

// claimedIDs reads the ids of the rows a hand-written claim (id, payload) returned, or its
// error.
func claimedIDs(rows *sql.Rows, err error) ([]int64, error) {
	if err != nil {
		return nil, err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		var payload []byte
		if err := rows.Scan(&id, &payload); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, rows.Close()
}
