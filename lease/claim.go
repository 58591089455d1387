package lease

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sqlinbox/inbox"
)

// Claim claims at most max due rows of the queue, in claim order (priority, retry_after, id, as
// the table has them), writing each a lease of now plus the lease length (the token) and
// counting its attempt, and commits before it returns. It reads the clock once. In transactional mode it then opens a
// transaction per delivery, at the dialect's level, and lends it to the handler as
// Delivery.Tx; if one cannot be opened, the claimed rows are given back and the error returned.
// On SQLite in transactional mode it claims one row at a time.
func (f *Form[D]) Claim(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := f.bound()
	if err != nil {
		return nil, err
	}
	if max < 1 {
		return nil, nil
	}
	if b.q.Transactional && f.d.Name() == "sqlite" {
		// Each delivery's transaction would wait for the write lock of the one before it
		// (at once in immediate and exclusive mode), which this claim holds until its
		// handler has run: one at a time.
		max = 1
	}
	ds, token, err := f.claimRows(ctx, b, max)
	if err != nil {
		return nil, err
	}
	return f.keepRows(ctx, b, ds, token)
}

// keepRows gives each of ds, claimed under token, a hold of its own and, in transactional mode, a
// transaction; if one cannot be opened, every row is given back and the error returned.
func (f *Form[D]) keepRows(ctx context.Context, b *binding, ds []*inbox.Delivery, token time.Time) ([]*inbox.Delivery, error) {
	holds := make([]*hold, len(ds))
	b.holdsMu.Lock()
	for i, d := range ds {
		holds[i] = &hold{token: token}
		d.Hold = holds[i]
		b.holds[holds[i]] = d.ID
	}
	b.holdsMu.Unlock()
	if !b.q.Transactional {
		return ds, nil
	}
	for i, d := range ds {
		// The transaction outlives this call, and database/sql rolls a transaction back when
		// the context it began with ends: it must not end with the claim's.
		tx, err := f.d.Begin(context.WithoutCancel(ctx), b.db)
		if err != nil {
			errs := []error{fmt.Errorf("inbox: table %q: opening the transaction of row %d: %w; the claimed rows were given back", f.t.Name, d.ID, err)}
			for j, h := range holds {
				h.mu.Lock()
				errs = append(errs, b.giveBack(context.WithoutCancel(ctx), h, ds[j].ID))
				h.mu.Unlock()
			}
			return nil, errors.Join(errs...)
		}
		holds[i].tx = tx
		d.LendTx(tx)
	}
	return ds, nil
}

// claimRows claims at most max rows under one token, read from the clock once, and commits.
func (f *Form[D]) claimRows(ctx context.Context, b *binding, max int) ([]*inbox.Delivery, time.Time, error) {
	now := time.Now()
	token := tokenAt(now.Add(b.lease))
	var ds []*inbox.Delivery
	var err error
	if b.sql.stamp != nil {
		ds, err = f.claimInTx(ctx, b, max, now, token)
	} else {
		ds, err = f.claimInOne(ctx, b, max, now, token)
	}
	if err != nil {
		return nil, token, fmt.Errorf("inbox: table %q: claiming: %w", f.t.Name, err)
	}
	return ds, token, nil
}

// tokenAt is the token for an expiry at t: as the database keeps it, UTC to the microsecond.
func tokenAt(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// claimInOne claims with one statement (Postgres, SQLite).
func (f *Form[D]) claimInOne(ctx context.Context, b *binding, max int, now, token time.Time) ([]*inbox.Delivery, error) {
	var ds []*inbox.Delivery
	err := b.query(ctx, b.claim, f.claimArgs(b, max, now, token), func(rows *sql.Rows) (err error) {
		if !b.sql.sortClaim {
			ds, err = b.st.Scan(rows)
		} else {
			ds, err = f.scanSorted(b, rows)
		}
		return err
	})
	return ds, err
}

// claimArgs are the arguments of the claim that is one statement (Postgres, SQLite).
func (f *Form[D]) claimArgs(b *binding, max int, now, token time.Time) []any {
	due := b.st.DueArgs(nil, f.d.Time(now), b.q.Name)
	if b.sql.sortClaim { // SQLite: the token comes first, in the SET clause
		return append(append([]any{f.d.Time(token)}, due...), f.d.Time(now), max)
	}
	return append(due, f.d.Time(now), max, f.d.Time(token))
}

// claimInTx claims in a READ COMMITTED transaction (MySQL, MariaDB): the SELECT locks the rows
// it returns, skipping rows other claims hold, and the UPDATE stamps them. The SELECT reads
// each attempt under the lock, so the attempt written is the one read plus one.
func (f *Form[D]) claimInTx(ctx context.Context, b *binding, max int, now, token time.Time) (ds []*inbox.Delivery, err error) {
	stamp, err := b.listStmt(ctx, "claim stamp", b.sql.stamp, max)
	if err != nil {
		return nil, err
	}
	tx, err := b.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	args := append(b.st.DueArgs(nil, f.d.Time(now), b.q.Name), f.d.Time(now), max)
	rows, err := tx.StmtContext(ctx, b.claim).QueryContext(ctx, args...)
	if err != nil {
		return nil, err
	}
	if ds, err = b.st.Scan(rows); err != nil {
		return nil, err
	}
	if len(ds) == 0 {
		return nil, tx.Commit()
	}
	// The statement takes max ids; a short claim repeats its last id (IN ignores repeats).
	args = []any{f.d.Time(token)}
	for i := range max {
		args = append(args, ds[min(i, len(ds)-1)].ID)
	}
	if _, err = tx.StmtContext(ctx, stamp).ExecContext(ctx, args...); err != nil {
		return nil, err
	}
	if err = tx.Commit(); err != nil {
		return nil, err
	}
	if b.st.Q.Attempt != "" {
		for _, d := range ds {
			d.Attempt++
		}
	}
	return ds, nil
}

// listKey names a statement over a list of ids: which statement, and how many ids.
type listKey struct {
	what string
	n    int
}

// listStmt returns statement what over n ids, preparing it the first time it is asked for
// (Open prepares the claim stamp for one id, the consumer's claim). Claims and batches pad
// their id lists to the length they asked for (IN ignores repeats), so a consumer prepares
// about one statement per batch size.
func (b *binding) listStmt(ctx context.Context, what string, query func(n int) string, n int) (*sql.Stmt, error) {
	b.listedMu.Lock()
	defer b.listedMu.Unlock()
	key := listKey{what, n}
	if s := b.listed[key]; s != nil {
		return s, nil
	}
	s, err := b.st.Prepare(ctx, b.db, what, query(n))
	if err != nil {
		return nil, err
	}
	b.listed[key] = s
	return s, nil
}

// scanSorted reads the SQLite claim's rows (the delivery's columns, then priority and
// retry_after where the table has them) and sorts them into claim order: priority, retry_after
// (NULL first, as SQLite sorts it; the fixed-width text sorts as time), id.
func (f *Form[D]) scanSorted(b *binding, rows *sql.Rows) ([]*inbox.Delivery, error) {
	defer rows.Close()
	type claimed struct {
		d          *inbox.Delivery
		priority   int64
		retryAfter sql.NullString
	}
	q := b.st.Q
	var out []claimed
	for rows.Next() {
		var c claimed
		var extra []any
		if q.Priority != "" {
			extra = append(extra, &c.priority)
		}
		if q.RetryAfter != "" {
			extra = append(extra, &c.retryAfter)
		}
		d, err := b.st.ScanOne(rows.Scan, extra...)
		if err != nil {
			return nil, err
		}
		c.d = d
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b claimed) int {
		if c := cmp.Compare(a.priority, b.priority); c != 0 {
			return c
		}
		if a.retryAfter.Valid != b.retryAfter.Valid {
			if a.retryAfter.Valid {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(a.retryAfter.String, b.retryAfter.String); c != 0 {
			return c
		}
		return cmp.Compare(a.d.ID, b.d.ID)
	})
	ds := make([]*inbox.Delivery, len(out))
	for i, c := range out {
		ds[i] = c.d
	}
	return ds, nil
}
