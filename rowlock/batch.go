package rowlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/settleplan"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/outcome"
)

var _ inbox.BatchForm = (*Form[Dialect])(nil)

// ClaimBatch claims up to max due rows of the queue in claim order with one SELECT … LIMIT max
// FOR UPDATE SKIP LOCKED, in one transaction opened at the dialect's level and held until the
// batch settles: that transaction and its pooled connection hold every row of the batch. The
// statement for each max is prepared at the first ClaimBatch that asks for it, and kept until
// Close. No rows is not an error. A transient conflict (a serialization failure, a deadlock, a
// lock wait timeout) is retried a few times before ClaimBatch reports it. Attempts read as
// Claim's do: the row's attempt column plus one.
//
// In transactional mode every delivery's Tx is the batch's transaction, behind one savepoint.
func (f *Form[D]) ClaimBatch(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	if err := f.life.Enter(); err != nil {
		return nil, err
	}
	defer f.life.Leave()
	if max < 1 {
		return nil, nil
	}
	claim, err := f.batchClaim(ctx, max)
	if err == nil {
		err = f.prepareSettles(ctx, max)
	}
	if err != nil {
		return nil, err
	}
	var ds []*inbox.Delivery
	err = f.retrying(ctx, func() (err error) {
		ds, err = f.claimTx(ctx, claim, max)
		return err
	})
	if err != nil {
		return nil, err
	}
	return ds, nil
}

// batchClaim returns the statement that claims up to n rows, preparing it at the first call.
func (f *Form[D]) batchClaim(ctx context.Context, n int) (*stmt.Stmt, error) {
	if n == 1 {
		return f.claim, nil
	}
	f.batchMu.Lock()
	defer f.batchMu.Unlock()
	if s := f.batchClaims[n]; s != nil {
		return s, nil
	}
	s, err := f.st.Statement(ctx, f.db, fmt.Sprintf("batch claim (LIMIT %d)", n), f.text.Claim(n))
	if err != nil {
		return nil, err
	}
	f.batchClaims[n] = s
	return s, nil
}

// SettleBatch applies os[i] to ds[i], the rows of one ClaimBatch, in the batch's transaction
// and commits it: Ack and Drop delete the rows or stamp processed_at; Retry adds one to attempt
// (without an attempt column the rows are left as they were); RetryAfter sets retry_after and
// adds one to attempt (without a retry_after column it acts as Retry and logs a warning). The
// zero outcome is retried, as the consumer does. On Postgres each kind of outcome is one
// statement naming its rows in an id IN (…) list padded to the batch's asked size by repeating
// the last id (RetryAfter runs its statement once per distinct delay); the ack and the retry of
// each size are prepared at the first ClaimBatch of that size, before its transaction begins,
// and kept until Close, and a stamp runs by its text: nothing is prepared inside the batch's
// transaction, where preparing would wait for a pooled connection the handlers may all hold. It
// binds a parameter per row: a batch stays under Postgres's 65,535 parameters a statement. On
// MySQL and MariaDB each row is one statement on its id, as a single delivery settles: InnoDB
// may take an IN list through a scan, which waits for the rows other batches
// hold. Either way the batch commits once.
//
// The transaction holds every row of the batch until it ends, so no row is lost while the
// batch is in work: a row lock batch never fails with inbox.ErrLeaseLost.
//
// In transactional mode SettleBatch first takes the transaction back from every delivery: when
// a statement of the handler's is still running on it, SettleBatch fails with
// inbox.ErrTransactionHeld at once, and the whole transaction is rolled back once that
// statement is done (the rows are unchanged, and claimable again then); when the database ended the transaction while the handler
// had it, SettleBatch rolls back and fails with inbox.ErrTransactionEnded, settling nothing, as
// Settle does. When every outcome is Ack the handler's writes commit with
// the settlements; otherwise they are rolled back to the savepoint first, and each Ack is
// settled as a Retry, since its writes did not land.
//
// A failure rolls the transaction back, so every row is unchanged and claimable again; so does
// a failed COMMIT, unless its outcome is unknown (the error wraps inbox.ErrCommitUnknown), when
// the rows may be settled instead.
func (f *Form[D]) SettleBatch(ctx context.Context, ds []*inbox.Delivery, os []outcome.Outcome) error {
	if len(os) != len(ds) || len(ds) == 0 {
		// Nothing to take; a closed form still refuses the call first.
		if err := f.life.Enter(); err != nil {
			return err
		}
		defer f.life.Leave()
		if len(os) != len(ds) {
			return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "SettleBatch of %d deliveries with %d outcomes: give one outcome per delivery; nothing settled, the batch is still held", len(ds), len(os))
		}
		return nil
	}
	h, err := f.takeBatch(ds)
	if err != nil {
		return err
	}
	defer f.life.Leave()
	defer h.cancel()

	if err := h.takeBack(); err != nil {
		return errors.Join(sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "settling the batch of %s: nothing settled, the rows are back in the queue: %w", rowsOf(ds), err), f.rollback(h))
	}

	writesLand := f.q.Transactional
	for _, o := range os {
		writesLand = writesLand && o.Kind() == outcome.KindAck
	}
	stmts := f.batchSettlements(ds, os, h.size, f.q.Transactional && !writesLand)
	if len(stmts) == 0 {
		// Retries without an attempt column: the rows as they were are the retry.
		return f.rollback(h)
	}
	if f.q.Transactional && !writesLand {
		if _, err := h.tx.ExecContext(ctx, f.text.RollbackToSavepoint().SQL); err != nil {
			return f.fail(h, ds, "rolling back the handler's writes", err)
		}
	}
	for _, s := range stmts {
		if _, err := s.stmt.ExecIn(ctx, h.tx, s.args...); err != nil {
			return f.backOff(ctx, ds, f.fail(h, ds, "the "+s.kind.String()+" statement", err))
		}
	}
	if err := h.tx.Commit(); err != nil {
		return f.backOff(ctx, ds, f.commitFailed(ds, "the settlement", err))
	}
	return nil
}

// batchSettlement is one statement of a batch's settlement, the kind it settles as and its
// arguments: one of the form's prepared statements for a single row, or a batch statement over
// an id IN list.
type batchSettlement struct {
	kind outcome.Kind
	stmt *stmt.Stmt
	args []any
}

// batchSettlements are the statements that apply os to the rows of ds, a batch claimed by a
// ClaimBatch of size n, as settleplan plans them: ack (with drop), retry, then each stamp. Where
// the database settles by id list (Caps.IDListSettles) each step is one statement over its ids
// padded to n; otherwise, and for a batch of one, each is the single row's statement, once per
// row: InnoDB may take an IN list through a scan that locks every row it reads, waiting for the
// rows other batches hold (on MariaDB 10.11 batch consumers draining a table deadlocked and
// timed out that way). With writesRolledBack an Ack is settled as a Retry. Where the form's
// acks are unflushed and the ack is the batch's only step, the ack is the unflushed one: the
// setting holds for the whole transaction, so a batch that also retries or fails a row waits
// for the disk.
func (f *Form[D]) batchSettlements(ds []*inbox.Delivery, os []outcome.Outcome, n int, writesRolledBack bool) []batchSettlement {
	p := settleplan.Of(f.shape, os, writesRolledBack)
	if len(p.Unscheduled) > 0 {
		f.log.Warn("inbox: RetryAfter on a table without a retry_after column retries at once: add the column and name it in inbox.Table.RetryAfter",
			"table", f.t.Name, "queue", f.q.Name, "ids", rowIDs(ds, p.Unscheduled))
	}
	unflushed := f.unflushed && len(p.Steps) == 1 && p.Steps[0].Kind == outcome.KindAck
	now := f.q.Now()
	var out []batchSettlement
	for _, step := range p.Steps {
		v := f.shape.Values(step, now, f.d.Time)
		if !f.d.Caps().IDListSettles || n == 1 {
			one := f.one(step.Kind, unflushed)
			for _, i := range step.Rows {
				v.IDs = []int64{ds[i].ID}
				out = append(out, batchSettlement{kind: step.Kind, stmt: one, args: one.Bind(nil, &v)})
			}
			continue
		}
		ids := rowIDs(ds, step.Rows)
		for len(ids) < n {
			ids = append(ids, ids[len(ids)-1]) // IN ignores the repeats
		}
		v.IDs = ids
		s := f.batchSettle(step.Kind, n, unflushed)
		out = append(out, batchSettlement{kind: step.Kind, stmt: s, args: s.Bind(make([]any, 0, 2+n), &v)})
	}
	return out
}

// rowIDs are the ids of the rows of ds at indexes rows.
func rowIDs(ds []*inbox.Delivery, rows []int) []int64 {
	ids := make([]int64, len(rows))
	for j, i := range rows {
		ids[j] = ds[i].ID
	}
	return ids
}

// settleKey names a batch settlement statement: the kind it settles as (Ack, Retry,
// RetryAfter or Fail), the length of its id list, and whether it is unflushed (an Ack's).
type settleKey struct {
	kind      outcome.Kind
	n         int
	unflushed bool
}

// prepareSettles prepares, where the database settles by id list, the batch settlements of a
// ClaimBatch of size n that most batches run (the ack, and the retry where the table counts
// attempts), before the batch's transaction begins: preparing takes a connection of the pool,
// which inside the transaction could wait for ever behind the handlers holding the others.
func (f *Form[D]) prepareSettles(ctx context.Context, n int) error {
	if !f.d.Caps().IDListSettles || n == 1 {
		return nil
	}
	keys := []settleKey{{outcome.KindAck, n, false}}
	if f.unflushed {
		keys = append(keys, settleKey{outcome.KindAck, n, true})
	}
	if f.retry != nil {
		keys = append(keys, settleKey{outcome.KindRetry, n, false})
	}
	f.batchMu.Lock()
	defer f.batchMu.Unlock()
	for _, key := range keys {
		if f.batchSettles[key] != nil {
			continue
		}
		what, text := fmt.Sprintf("batch %s (%d ids)", key.kind, n), f.text
		if key.unflushed {
			what, text = "unflushed "+what, text.Unflushed()
		}
		s, err := f.st.Statement(ctx, f.db, what, text.Settle(key.kind, sqltext.ByIDs(n)))
		if err != nil {
			return err
		}
		f.batchSettles[key] = s
	}
	return nil
}

// batchSettle returns the batch settlement statement of kind k over an id IN list of n
// placeholders, unflushed where asked (sqltext.RowLock.Unflushed): the one prepareSettles
// prepared, or else (a stamp, which few batches need) the statement by its text, never
// prepared inside the batch's transaction.
func (f *Form[D]) batchSettle(k outcome.Kind, n int, unflushed bool) *stmt.Stmt {
	f.batchMu.Lock()
	s := f.batchSettles[settleKey{k, n, unflushed}]
	f.batchMu.Unlock()
	if s != nil {
		return s
	}
	text := f.text
	if unflushed {
		text = text.Unflushed()
	}
	return stmt.ByText(f.db, text.Settle(k, sqltext.ByIDs(n)))
}

// ReleaseBatch rolls the batch's transaction back: its rows are claimable again at once, with
// their attempt counts unchanged. In transactional mode a transaction a statement of the
// handler's still runs on is rolled back once that statement is done, as Release does.
func (f *Form[D]) ReleaseBatch(_ context.Context, ds []*inbox.Delivery) error {
	if len(ds) == 0 {
		// Nothing to give back; a closed form still refuses the call.
		err := f.life.Enter()
		if err == nil {
			f.life.Leave()
		}
		return err
	}
	h, err := f.takeBatch(ds)
	if err != nil {
		return err
	}
	defer f.life.Leave()
	if err := h.end(); err != nil {
		return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "releasing the batch of %s: %w", rowsOf(ds), err)
	}
	return nil
}

// takeBatch takes the hold of the batch ds from the form, so that exactly one of SettleBatch,
// ReleaseBatch and Close ends it, and admits the call, which the caller ends with f.life.Leave.
// ds must be the whole batch, as ClaimBatch returned it (in any order); anything else is refused
// and leaves the hold as it was.
func (f *Form[D]) takeBatch(ds []*inbox.Delivery) (*hold, error) {
	h, _ := inbox.HoldOf[*hold](ds[0])
	switch kept, err := f.life.Take(h, func() error {
		if !h.batch {
			return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "delivery %d was claimed alone, by Claim: settle it with Settle and give it back with Release", ds[0].ID)
		}
		whole := len(ds) == len(h.ds)
		seen := make(map[*inbox.Delivery]bool, len(ds))
		for _, d := range ds {
			if dh, _ := inbox.HoldOf[*hold](d); dh != h || seen[d] {
				whole = false
				break
			}
			seen[d] = true
		}
		if !whole {
			return sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "the deliveries given (%s) are not the batch ClaimBatch returned (%s): settle or give back a batch whole, each delivery once", rowsOf(ds), rowsOf(h.ds))
		}
		return nil
	}); {
	case err != nil:
		return nil, err
	case !kept:
		return nil, sentinel.Errorf(inbox.ErrClosed, sentinel.Table(f.t.Name), "the batch of %s is not held by this form (settled, released, or given back at Close); its rows are back in the queue or settled", rowsOf(ds))
	}
	return h, nil
}
