package lease

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/outcome"
)

// mergeMax bounds the rows one merged settlement takes; more wait for the next.
const mergeMax = 64

// merger runs the settlements of one kind (ack, or retry) that arrive while one of them is in
// flight as one statement: a guarded statement per row would commit, and on the servers flush,
// once per row, whereas the rows of different workers finishing at about the same time can
// share a commit. A settlement still returns only once its own row's statement has committed,
// and still reports a row whose lease ran out; a lone settlement runs at once, as it would
// alone. Postgres and SQLite only, where the statement returns the ids it changed.
type merger struct {
	b    *binding
	what string                        // "ack" or "retry"
	head func() sqltext.Values         // the values besides the rows' (the ack's processed_at)
	list func(n int) sqltext.Statement // the statement over n rows (sqltext.ByPairs)
	one  *stmt.Stmt                    // the single-row statement, for a row alone

	turn chan struct{} // holds a token while a statement of this kind runs

	mu    sync.Mutex
	queue []*mergeRow
}

type mergeRow struct {
	id    int64
	token time.Time
	done  chan error // receives the row's result once
	args  rowArgs    // its arguments, where it runs alone
}

// newMerger merges the settlements of kind k (outcome.KindAck or outcome.KindRetry), built by
// l, which single rows settle by one.
func newMerger(b *binding, what string, l sqltext.Lease, k outcome.Kind, one *stmt.Stmt, head func() sqltext.Values) *merger {
	list := func(n int) sqltext.Statement { return l.Settle(k, sqltext.ByPairs(n)) }
	return &merger{b: b, what: what, list: list, one: one, head: head, turn: make(chan struct{}, 1)}
}

// settle settles row id under token, merged with the settlements of the same kind that queue up
// meanwhile. Whichever caller takes the turn runs the queued rows, its own among them or not,
// and hands each its result.
func (m *merger) settle(ctx context.Context, id int64, token time.Time) error {
	r := &mergeRow{id: id, token: token, done: make(chan error, 1)}
	m.mu.Lock()
	m.queue = append(m.queue, r)
	m.mu.Unlock()
	for {
		select {
		case err := <-r.done:
			return err
		case m.turn <- struct{}{}:
		}
		m.mu.Lock()
		group := m.take()
		m.mu.Unlock()
		if len(group) > 0 {
			m.run(ctx, group)
		}
		<-m.turn
	}
}

// take removes from the queue the rows of the next statement: at most mergeMax, each id once.
// The statement reports the ids it changed, so two settlements of one row (a row claimed again
// after its lease ran out, by another worker of this consumer) must not share one: the one that
// changed nothing would read as settled. The later waits for the next statement.
func (m *merger) take() []*mergeRow {
	var group []*mergeRow
	seen := make(map[int64]bool, min(len(m.queue), mergeMax))
	rest := m.queue[:0]
	for _, r := range m.queue {
		if len(group) == mergeMax || seen[r.id] {
			rest = append(rest, r)
			continue
		}
		seen[r.id] = true
		group = append(group, r)
	}
	clear(m.queue[len(rest):])
	m.queue = rest
	return group
}

// run settles group in one statement, padded to a power of two rows so that few statements are
// prepared, and sends each row its result.
func (m *merger) run(ctx context.Context, group []*mergeRow) {
	d := m.b.st.D
	if len(group) == 1 {
		r := group[0]
		v := m.head()
		r.args.set(&v, r.id, d.Time(r.token))
		res, err := m.b.exec(ctx, m.one, m.one.Bind(nil, &v)...)
		var n int64
		if err == nil {
			n, err = res.RowsAffected()
		}
		r.done <- m.result(r, n > 0, err)
		return
	}
	size := 2
	for size < len(group) {
		size *= 2
	}
	v := m.head()
	v.IDs, v.Tokens = make([]int64, size), make([]any, size)
	for i := range size {
		r := group[min(i, len(group)-1)]
		v.IDs[i], v.Tokens[i] = r.id, d.Time(r.token)
	}
	changed := map[int64]bool{}
	s, err := m.b.listStmt(ctx, m.what+" merged", m.list, size)
	if err == nil {
		err = m.b.query(ctx, s, s.Bind(nil, &v), func(rows *sql.Rows) error {
			for rows.Next() {
				var id int64
				if err := rows.Scan(&id); err != nil {
					return err
				}
				changed[id] = true
			}
			return rows.Err()
		})
	}
	for _, r := range group {
		r.done <- m.result(r, changed[r.id], err)
	}
}

func (m *merger) result(r *mergeRow, changed bool, err error) error {
	table := m.b.st.Raw.Name
	switch {
	case err != nil:
		return sentinel.Errorf(nil, sentinel.Row(table, r.id), "%s: %w", m.what, err)
	case !changed:
		return lostLease(table, fmt.Sprintf("row %d", r.id), m.what)
	}
	return nil
}
