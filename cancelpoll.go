package inbox

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"time"

	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqlitewriter"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/outcome"
)

// cancelPoll reads, every Config.CancelPoll, which rows the run holds were cancelled (Cancel),
// and applies the table's requests.
type cancelPoll struct {
	r     *run
	db    *sql.DB
	d     dialect.Dialect
	x     sqltext.Cancels
	table string
	every time.Duration
}

// cancelPoll returns the run's cancel poll, nil where the table has no CancelledAt column.
func (r *run) cancelPoll() *cancelPoll {
	if r.plan.Described.CancelledAt == "" {
		return nil
	}
	q, err := r.plan.Described.Quote(r.plan.Dialect)
	if err != nil {
		return nil // the form quoted it at Open
	}
	return &cancelPoll{
		r: r, db: r.c.db, d: r.plan.Dialect, table: r.plan.Table, every: r.c.cfg.CancelPoll,
		x: sqltext.New(r.plan.Dialect.Caps(), sqltext.Table(q)).Cancels(q.LockedUntil),
	}
}

// run polls until ctx is done.
func (p *cancelPoll) run(ctx context.Context) {
	ticker := time.NewTicker(p.every)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if err := p.poll(ctx); err != nil && ctx.Err() == nil {
			p.r.log.Warn("inbox: reading the cancel requests failed; trying again at the next poll", "err", err)
		}
	}
}

// poll tells the handlers of the rows asked, then applies the requests of the rows it does not
// hold.
func (p *cancelPoll) poll(ctx context.Context) error {
	held := p.held()
	if len(held) > 0 {
		asked, err := p.asked(ctx, held)
		if err != nil {
			return err
		}
		p.tell(asked)
	}
	return p.apply(ctx, held)
}

// held are the ids of the rows in the run's handlers.
func (p *cancelPoll) held() map[int64]bool {
	held := map[int64]bool{}
	for _, s := range p.r.workers() {
		s.mu.Lock()
		if !s.abandoned {
			for _, d := range s.inWork {
				held[d.ID] = true
			}
		}
		s.mu.Unlock()
	}
	return held
}

// asked reads which of the held rows were cancelled.
func (p *cancelPoll) asked(ctx context.Context, held map[int64]bool) (map[int64]bool, error) {
	v := &sqltext.Values{Table: p.table}
	for id := range held {
		v.IDs = append(v.IDs, id)
	}
	st := p.x.Asked(len(v.IDs))
	rows, err := p.db.QueryContext(ctx, st.SQL, st.Bind(nil, v)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	asked := map[int64]bool{}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		asked[id] = true
	}
	return asked, rows.Err()
}

// tell marks the rows asked in the units in work, and cancels the handler of a single delivery
// asked with the cause ErrCancelled. A batch's handler goes on, since cancelling its context
// would cut its other rows off too: its rows asked settle as cancelled all the same.
func (p *cancelPoll) tell(asked map[int64]bool) {
	for _, s := range p.r.workers() {
		s.mu.Lock()
		for _, d := range s.inWork {
			if asked[d.ID] && !s.abandoned && !slices.Contains(s.asked, d.ID) {
				s.asked = append(s.asked, d.ID)
				if len(s.inWork) == 1 && s.ctx.Err() == nil {
					s.cancel(ErrCancelled)
				}
			}
		}
		s.mu.Unlock()
	}
}

// apply applies each request of the table whose row the run does not hold, each in a
// transaction of its own that never waits for a row another consumer holds: a row queued again
// is cancelled, and the request of a row cancelled, settled or gone is deleted (a processed
// row is stamped cancelled_at first: a cancel was asked after it succeeded). A row in work
// elsewhere keeps its request, for its consumer.
func (p *cancelPoll) apply(ctx context.Context, held map[int64]bool) error {
	st := p.x.Requests()
	rows, err := p.db.QueryContext(ctx, st.SQL, st.Bind(nil, &sqltext.Values{Table: p.table})...)
	if err != nil {
		return err
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return err
		}
		if !held[id] {
			ids = append(ids, id)
		}
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return err
	}
	for _, id := range ids {
		if err := p.applyOne(ctx, id); err != nil {
			return sentinel.Errorf(nil, sentinel.Row(p.table, id), "applying its cancel request: %w", err)
		}
	}
	return nil
}

// applyOne applies the request of the row id (see apply).
func (p *cancelPoll) applyOne(ctx context.Context, id int64) error {
	if p.d.Caps().OneWriter {
		w := sqlitewriter.For(p.db)
		w.Lock()
		defer w.Unlock()
	}
	tx, err := p.d.Begin(ctx, p.db)
	if err != nil {
		return err
	}
	now := p.d.Time(clockNow(p.r.c.cfg.Clock))
	v := &sqltext.Values{Now: now, At: now, Table: p.table, IDs: []int64{id}}
	o, err := cancelQueued(ctx, tx, p.d, p.x, v)
	if err == nil && o == AlreadyProcessed {
		if noted := p.x.Noted(); !noted.Empty() {
			_, err = tx.ExecContext(ctx, noted.SQL, noted.Bind(nil, v)...)
		}
	}
	if err == nil && o != 0 {
		forget := p.x.Forget()
		_, err = tx.ExecContext(ctx, forget.SQL, forget.Bind(nil, v)...)
	}
	if err != nil {
		return errors.Join(err, tx.Rollback())
	}
	if o == Cancelled {
		p.r.log.Info("inbox: row cancelled: its request found it queued again", "id", id)
	}
	return tx.Commit()
}

// cancelledOutcomes settles as cancelled each row of u that was asked to be cancelled while its
// handler ran: outs[i] becomes outcome.Cancel, but for an Ack outside transactional mode, whose
// work outside the library's transaction is done and kept (the request then stamps the
// processed row's cancelled_at, to say a cancel was asked).
func cancelledOutcomes(u []*Delivery, outs []outcome.Outcome, asked []int64, transactional bool) {
	for i, d := range u {
		if !slices.Contains(asked, d.ID) {
			continue
		}
		if outs[i].Kind() == outcome.KindAck && !transactional {
			continue
		}
		outs[i] = outcome.Cancel().WithError(ErrCancelled)
	}
}
