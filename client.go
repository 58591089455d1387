package inbox

import (
	"context"
	"database/sql"

	"github.com/sqlinbox/inbox/dialect"
)

// Client is the handle of one inbox table on one database: made once from the database, the
// dialect and the table's description, it publishes rows (alone, or in the caller's
// transaction), makes the table's consumers, and gives the forms (rowlock.For, lease.For,
// advisory.For) and the operator (admin.For) what they need, so that none of them repeats the
// three. Its type carries the dialect's, so that a form the database cannot run does not
// compile: rowlock.For of a Client[dialect.SQLite[…]] is refused by the compiler, as
// rowlock.New is. A Client is safe for concurrent use.
type Client[D dialect.Dialect] struct {
	db    *sql.DB
	d     D
	t     Table
	clock Clock // nil: this host's
	// refusePaused has publishing refuse a paused queue's messages (RefusingPaused).
	refusePaused bool
}

// NewClient returns the client of table t on db, whose database d speaks. It checks the
// description (Table.Validate) and every name against d's rules for identifiers; the table
// itself is checked against the database when a consumer starts (ErrSchema).
func NewClient[D dialect.Dialect](db *sql.DB, d D, t Table) (*Client[D], error) {
	if _, err := t.Quote(d); err != nil {
		return nil, err
	}
	return &Client[D]{db: db, d: d, t: t}, nil
}

// WithClock returns a client like c whose publishing and Reschedule read clock: the time a
// Message.Delay counts from, and the now at or before which a Message.RunAt or a Reschedule's
// time is due at once. Give it the DatabaseClock the consumers read (Config.Clock), so that a
// row delayed on a host whose clock is off falls due when the consumers' clock says, not early
// or late by the host's skew. By default (and for the functions Enqueue, EnqueueIDs and
// EnqueueTx) it is this host's clock. A RunAt is an absolute time and no clock changes it.
func (c *Client[D]) WithClock(clock Clock) *Client[D] {
	out := *c
	out.clock = clock
	return &out
}

// RefusingPaused returns a client like c whose Enqueue, EnqueueIDs, EnqueueTx, EnqueueResults
// and EnqueueTxResults refuse, with ErrPaused and publishing nothing, messages of a queue that
// is paused (Pause), so that producers learn of the pause rather than pile rows up behind it.
// It needs the description's pauses table (Table.Pauses). Each call first reads the pauses
// table for each queue its messages name (one primary-key read per queue, in tx for the
// methods that publish in the caller's transaction): a publish that read its queue not paused
// commits its rows even where a Pause commits in between, and they wait like the queue's other
// rows. The package's functions (Enqueue, EnqueueTx, …) never refuse.
func (c *Client[D]) RefusingPaused() *Client[D] {
	out := *c
	out.refusePaused = true
	return &out
}

// DB is the client's database.
func (c *Client[D]) DB() *sql.DB { return c.db }

// Dialect is the client's dialect.
func (c *Client[D]) Dialect() D { return c.d }

// Table is the client's table, as described.
func (c *Client[D]) Table() Table { return c.t }

// Enqueue publishes msgs as rows of the table, all or nothing (see the function Enqueue).
func (c *Client[D]) Enqueue(ctx context.Context, msgs ...Message) error {
	if err := c.refuseIfPaused(ctx, c.db, msgs); err != nil {
		return err
	}
	return publish(ctx, c.db, c.d, c.t, c.clock, msgs, nil)
}

// EnqueueIDs publishes msgs as Enqueue does and returns their rows' ids, in the order of msgs
// (see the function EnqueueIDs, which says what that costs).
func (c *Client[D]) EnqueueIDs(ctx context.Context, msgs ...Message) ([]int64, error) {
	if err := c.refuseIfPaused(ctx, c.db, msgs); err != nil {
		return nil, err
	}
	return publishIDs(ctx, c.db, c.d, c.t, c.clock, msgs)
}

// EnqueueTx publishes msgs inside tx, the caller's own transaction: they commit or roll back
// with its other writes (see the function EnqueueTx).
func (c *Client[D]) EnqueueTx(ctx context.Context, tx Tx, msgs ...Message) error {
	if err := c.refuseIfPaused(ctx, tx, msgs); err != nil {
		return err
	}
	return enqueueTx(ctx, tx, c.d, c.t, c.clock, msgs)
}

// NewConsumer returns a consumer of the table's rows, held by form (made by rowlock.For,
// lease.For or advisory.For of this client) and handled one at a time by h: a *Kinds, to run
// jobs by kind, or any Handler (see the function NewConsumer).
func (c *Client[D]) NewConsumer(form Form, h Handler, cfg *Config) *Consumer {
	return NewConsumer(c.db, form, h, cfg)
}

// NewBatchConsumer returns a consumer of the table's rows in batches of at most size rows (see
// the function NewBatchConsumer).
func (c *Client[D]) NewBatchConsumer(form BatchForm, size int, h BatchHandler, cfg *Config) *Consumer {
	return NewBatchConsumer(c.db, form, size, h, cfg)
}

// EnqueueResults publishes msgs as Enqueue does and says what became of each: its row's id, and
// for a message whose UniqueKey another row holds, that row's id and what OnConflict did (see
// the function EnqueueResults).
func (c *Client[D]) EnqueueResults(ctx context.Context, msgs ...Message) ([]Enqueued, error) {
	if err := c.refuseIfPaused(ctx, c.db, msgs); err != nil {
		return nil, err
	}
	return publishResults(ctx, c.db, c.d, c.t, c.clock, msgs)
}

// EnqueueTxResults publishes msgs inside tx, the caller's own transaction, as EnqueueResults
// does (see the function EnqueueTxResults).
func (c *Client[D]) EnqueueTxResults(ctx context.Context, tx Tx, msgs ...Message) ([]Enqueued, error) {
	if err := c.refuseIfPaused(ctx, tx, msgs); err != nil {
		return nil, err
	}
	return enqueueTxResults(ctx, tx, c.d, c.t, c.clock, msgs)
}
