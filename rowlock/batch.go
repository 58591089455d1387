package rowlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sqlinbox/inbox"
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
	if err != nil {
		return nil, err
	}
	var ds []*inbox.Delivery
	err = f.retrying(ctx, func() (err error) {
		ds, err = f.claimTx(ctx, claim, true)
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
// prepared statement naming its rows in an id IN (…) list padded to the batch's size by
// repeating the last id (RetryAfter runs its statement once per distinct delay). The statement
// of each kind and batch size is prepared at the first SettleBatch that runs it and kept until
// Close, so a consumer prepares about one statement per kind and batch size, whatever the mix
// of outcomes. It binds a parameter per row: a batch stays under Postgres's 65,535 parameters
// a statement. On MySQL and MariaDB each row is one statement on its id, as a single delivery
// settles: InnoDB may take an IN list through a scan, which waits for the rows other batches
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
			return fmt.Errorf("inbox: table %q, queue %q: SettleBatch of %d deliveries with %d outcomes: give one outcome per delivery; nothing settled, the batch is still held", f.t.Name, f.q.Name, len(ds), len(os))
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
		return errors.Join(fmt.Errorf("inbox: table %q, queue %q: settling the batch of %s: nothing settled, the rows are back in the queue: %w", f.t.Name, f.q.Name, rowsOf(ds), err), f.rollback(h))
	}

	writesLand := f.q.Transactional
	for _, o := range os {
		writesLand = writesLand && o.Kind() == outcome.KindAck
	}
	stmts, err := f.batchSettlements(ctx, ds, os, len(h.ds), f.q.Transactional && !writesLand)
	if err != nil {
		return f.fail(h, ds, "preparing the settlement", err)
	}
	if len(stmts) == 0 {
		// Retries without an attempt column: the rows as they were are the retry.
		return f.rollback(h)
	}
	if f.q.Transactional && !writesLand {
		if _, err := h.tx.ExecContext(ctx, f.text.RollbackToSavepoint()); err != nil {
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

// batchSettlements are the statements that apply os to the rows of ds, a batch of n rows as
// claimed: ack (with drop), retry, then retry after, one per distinct delay, each present when
// a row needs it. On Postgres each is a prepared statement over an id IN list padded to n; on
// MySQL and MariaDB each is the single row's statement, once per row. With ackAsRetry an Ack
// is settled as a Retry. Where the form's acks are unflushed and the acks are the batch's only
// statements, the ack is the unflushed one: the setting holds for the whole transaction, so a
// batch that also retries or fails a row waits for the disk.
func (f *Form[D]) batchSettlements(ctx context.Context, ds []*inbox.Delivery, os []outcome.Outcome, n int, ackAsRetry bool) ([]batchSettlement, error) {
	var (
		acks, retries bool
		stamps        []stampKey // of the rows retried after a delay or failed, in the order first met
		unscheduled   []int64    // RetryAfter rows retried at once, for want of a column
	)
	for i, o := range os {
		switch k := f.settlesAs(o, ackAsRetry); k {
		case outcome.KindAck:
			acks = true
		case outcome.KindRetry:
			retries = true
			if o.Kind() == outcome.KindRetryAfter {
				unscheduled = append(unscheduled, ds[i].ID)
			}
		default:
			if sk := f.stampOf(k, o); !slices.Contains(stamps, sk) {
				stamps = append(stamps, sk)
			}
		}
	}
	// Only acks change rows: the transaction may commit without waiting, as a single ack does.
	ackUnflushed := f.unflushed && !(retries && f.retry != nil) && len(stamps) == 0
	if len(unscheduled) > 0 {
		f.log.Warn("inbox: RetryAfter on a table without a retry_after column retries at once: add the column and name it in inbox.Table.RetryAfter",
			"table", f.t.Name, "queue", f.q.Name, "ids", unscheduled)
	}

	var out []batchSettlement
	// add settles the rows that settle as kind k (with stamp sk, for a retry after or a
	// fail), binding lead before the ids: where the database settles by id list
	// (Caps.IDListSettles) with one prepared statement over their ids padded to n, or else
	// with one, the single row's statement, per row. InnoDB may take an IN list through a scan
	// that locks every row it reads, waiting for the rows other batches hold: on MariaDB 10.11
	// batch consumers draining a table deadlocked and timed out that way.
	inLists := f.d.Caps().IDListSettles
	add := func(k outcome.Kind, one *stmt.Stmt, sk stampKey, lead ...any) error {
		var args []any
		for i, o := range os {
			if f.settlesAs(o, ackAsRetry) != k || sk.kind != outcome.KindNone && f.stampOf(k, o) != sk {
				continue
			}
			if !inLists {
				out = append(out, batchSettlement{kind: k, stmt: one, args: append(slices.Clip(lead), ds[i].ID)})
				continue
			}
			if args == nil {
				args = make([]any, len(lead), len(lead)+n)
				copy(args, lead)
			}
			args = append(args, ds[i].ID)
		}
		if args == nil {
			return nil
		}
		for len(args) < cap(args) {
			args = append(args, args[len(args)-1]) // IN ignores the repeats
		}
		s, err := f.batchSettle(ctx, k, n, k == outcome.KindAck && ackUnflushed)
		if err != nil {
			return err
		}
		out = append(out, batchSettlement{kind: k, stmt: s, args: args})
		return nil
	}
	now := f.q.Now()
	if acks {
		ack := f.ack
		if ackUnflushed {
			ack = f.ackUnflushed
		}
		var err error
		if f.t.ProcessedAt != "" {
			err = add(outcome.KindAck, ack, stampKey{}, f.d.Time(now))
		} else {
			err = add(outcome.KindAck, ack, stampKey{})
		}
		if err != nil {
			return nil, err
		}
	}
	if retries && f.retry != nil {
		if err := add(outcome.KindRetry, f.retry, stampKey{}); err != nil {
			return nil, err
		}
	}
	for _, sk := range stamps {
		one := f.retryAfter
		if sk.kind == outcome.KindFail {
			one = f.dead
		}
		if err := add(sk.kind, one, sk, f.stampArgs(now.Add(sk.delay), sk.lastError)...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// settlesAs is the kind a batch's row settles as with outcome o: Ack for Ack and Drop (and Fail
// where the table has no dead_at column), Fail for Fail, RetryAfter for RetryAfter where the
// table has a retry_after column, Retry for the rest (and, with ackAsRetry, for Ack).
func (f *Form[D]) settlesAs(o outcome.Outcome, ackAsRetry bool) outcome.Kind {
	switch k := o.Kind(); {
	case k == outcome.KindFail && f.dead != nil:
		return outcome.KindFail
	case k == outcome.KindDrop, k == outcome.KindFail, k == outcome.KindAck && !ackAsRetry:
		return outcome.KindAck
	case k == outcome.KindRetryAfter && f.retryAfter != nil:
		return outcome.KindRetryAfter
	}
	return outcome.KindRetry
}

// stampKey groups the rows of a batch that one stamping statement settles: a retry after of
// one delay, or a fail, with one last error.
type stampKey struct {
	kind      outcome.Kind // RetryAfter or Fail
	delay     time.Duration
	lastError any // the text, or nil
}

func (f *Form[D]) stampOf(k outcome.Kind, o outcome.Outcome) stampKey {
	sk := stampKey{kind: k, delay: o.Delay()}
	if f.t.LastError != "" {
		sk.lastError = o.LastError()
	}
	return sk
}

// settleKey names a batch settlement statement: the kind it settles as (Ack, Retry,
// RetryAfter or Fail), the length of its id list, and whether it is unflushed (an Ack's).
type settleKey struct {
	kind      outcome.Kind
	n         int
	unflushed bool
}

// batchSettle returns the batch settlement statement of kind k over an id IN list of n
// placeholders, unflushed where asked (sqltext.RowLock.Unflushed), preparing it at the first
// call.
func (f *Form[D]) batchSettle(ctx context.Context, k outcome.Kind, n int, unflushed bool) (*stmt.Stmt, error) {
	f.batchMu.Lock()
	defer f.batchMu.Unlock()
	key := settleKey{k, n, unflushed}
	if s := f.batchSettles[key]; s != nil {
		return s, nil
	}
	what, text := fmt.Sprintf("batch %s (%d ids)", k, n), f.text
	if unflushed {
		what, text = "unflushed "+what, text.Unflushed()
	}
	s, err := f.st.Statement(ctx, f.db, what, text.Settle(k, sqltext.ByIDs(n)))
	if err != nil {
		return nil, err
	}
	f.batchSettles[key] = s
	return s, nil
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
		return fmt.Errorf("inbox: table %q, queue %q: releasing the batch of %s: %w", f.t.Name, f.q.Name, rowsOf(ds), err)
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
			return fmt.Errorf("inbox: table %q, queue %q: delivery %d was claimed alone, by Claim: settle it with Settle and give it back with Release", f.t.Name, f.q.Name, ds[0].ID)
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
			return fmt.Errorf("inbox: table %q, queue %q: the deliveries given (%s) are not the batch ClaimBatch returned (%s): settle or give back a batch whole, each delivery once", f.t.Name, f.q.Name, rowsOf(ds), rowsOf(h.ds))
		}
		return nil
	}); {
	case err != nil:
		return nil, err
	case !kept:
		return nil, fmt.Errorf("%w: table %q: the batch of %s is not held by this form (settled, released, or given back at Close); its rows are back in the queue or settled", inbox.ErrClosed, f.t.Name, rowsOf(ds))
	}
	return h, nil
}
