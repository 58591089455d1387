// Package inbox turns a table in your own database into a task queue: your application inserts
// rows, consumers claim them, run a handler, and settle each row by the handler's outcome. It
// runs over plain database/sql on Postgres (9.5+), MySQL (8.0.1+), MariaDB (10.6+) and SQLite
// (3.35+), and imports nothing but the standard library: bring your own driver.
//
// # Forms
//
// A form is how a row is held while its handler runs. Each is its own package:
//
//	form       package   what holds a row in work             after a crash               cost
//	row lock   rowlock   SELECT … FOR UPDATE SKIP LOCKED in   returns at once (rollback)  a pooled connection
//	                     a transaction open while the                                     per message in work
//	                     handler runs; the settlement commits
//	lease      lease     an expiry written into the row,      returns when the lease      statements to claim,
//	                     extended every half lease            runs out                    extend and settle
//	advisory   advisory  a session advisory lock on the       returns at once (the        a pooled connection
//	                     row's key, on a pinned connection    session ends)               per message in work
//
//	           Postgres   MySQL   MariaDB   SQLite
//	row lock   yes        yes     yes       does not compile (no row locks)
//	lease      yes        yes     yes       yes
//	advisory   yes        yes     yes       does not compile (no session locks)
//
// # Dialects and levels
//
// A dialect carries the isolation level (SQLite: the transaction mode) its transactions open at
// in its type, and a level the database does not open does not compile:
//
//	           Default           ReadUncommitted  ReadCommitted  RepeatableRead  Serializable  Deferred  Immediate  Exclusive
//	Postgres   plain BEGIN       no               yes            yes             yes           no        no         no
//	MySQL      READ COMMITTED    yes              yes            yes             yes           no        no         no
//	MariaDB    READ COMMITTED    yes              yes            yes             yes           no        no         no
//	SQLite     plain BEGIN       no               no             no              no            yes       yes        yes
//
// The level governs the transactions opened for a delivery's work: the row lock form's claim
// transaction, and in transactional mode the transaction the handler writes through. When the
// database is only known at run time, dialect.Detect and dialect.Parse check the same pairs when
// the consumer starts, failing with ErrDialect.
//
// # Quick start
//
//	// A typed job: its kind declared once, its arguments JSON.
//	type SendInvoice struct{ Number int }
//	func (SendInvoice) Kind() string { return "send_invoice" }
//
//	client, err := inbox.NewClient(db, dialect.Postgres[isolation.ReadCommitted]{}, inbox.Table{
//		Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Kind: "kind", Attempt: "attempt",
//		RetryAfter: "retry_after", DeadAt: "dead_at", LastError: "last_error"})
//
//	// Publish, alone or inside your own transaction (EnqueueTx).
//	err = client.Enqueue(ctx, inbox.Job(SendInvoice{Number: 42}))
//
//	// Consume with four workers, each holding its row's lock until its outcome commits.
//	var jobs inbox.Kinds
//	inbox.Handle(&jobs, func(ctx context.Context, d *inbox.Delivery, job SendInvoice) error {
//		return issue(ctx, job.Number) // an error retries by the retry policy
//	})
//	c := client.NewConsumer(rowlock.For(client), &jobs, &inbox.Config{Workers: 4})
//	err = c.Run(ctx) // until ctx is done, then a graceful shutdown
//
// The README's Quick start is this as a complete program on SQLite (examples' Example_quickStart),
// its table created by what inbox schema prints.
//
// # Claimable rows
//
// A claim takes a row when it is not processed (processed_at NULL), not dead (dead_at NULL),
// below the attempt limit (its attempt column under Config.MaxAttempts), due (retry_after NULL
// or past), of the consumer's queue (its queue column equal to Config.Queue) and not held (the
// lease form: locked_until NULL or past), each where the table has the column; in claim order,
// priority, retry_after (a row never delayed first), id. Some rows never become claimable by
// themselves: a NULL in the queue column, which no queue matches; a row at the attempt limit
// whose last delivery did not settle and whose death failed (ErrDeathFailed) or never ran; a
// retry_after more than 100 years ahead (9999-12-31, Postgres's infinity), which is a way of
// writing never, since no backoff and no row parked for a date to come waits that long; and on
// SQLite a retry_after that is not a time in dialect.SQLiteTimeLayout, which compares as text. A consumer searches its queue for
// such rows at Run's start and then every ten minutes (a few reads, each bounded by a LIMIT and
// taking no lock a claim waits for) and logs each kind with its count and a few ids, once for as
// long as it stays as it is (see Unclaimable).
//
// # Kinds of job
//
// Where the table has a Kind column (Table.Kind), Job publishes a typed value as a row of its
// kind, and a consumer whose handler is a *Kinds claims the rows of the kinds registered with
// it (Handle) alone, each under its kind's options (KindOptions). Rows of other kinds wait for a
// consumer that runs them; a consumer of a *Kinds searches its queue for them at Run's start
// and then every ten minutes, and logs each such kind once a run, at WARN, with its rows and
// the wait of its oldest due row. admin.Stats counts each queue's rows per kind, the inbox
// command's stats does with -kind-column, the OpenTelemetry observer (package inboxotel) sets
// inbox.kind on a delivery's span and its counters, and inboxtest.HandleJob runs a typed
// handler under its kind's attempt limit and retry policy.
//
// # Where settlements run
//
// A worker handles its unit, a row or a batch, and the unit's settlement then runs in one of
// three places:
//
//   - Behind the worker, which takes its next row meanwhile: the settlement of a single row
//     whose hold is nothing of the worker's (the lease form outside transactional mode, but on
//     SQLite), when its outcome takes the row out of the queue (an Ack, a Drop, a Fail). Up to
//     four settlements per worker run so, side by side; the lease form on Postgres gives those
//     that run at once one statement and one commit. A row whose settlement has not committed
//     is still held, so no claim takes it; Run waits for every settlement handed over before it
//     closes the form. A retry settles in its worker instead, so that its row is back in the
//     queue, its retry_after written, before the worker claims again: a lone worker still takes
//     a retried row of the first priority next.
//   - With the worker's next claim, in one transaction (the lease form on SQLite outside
//     transactional mode, whose one writer commits one transaction at a time): a single row's
//     settlement, when its worker would claim next and no other worker waits for a row or
//     settles.
//   - In the worker, before it takes its next unit: everything else. A batch settles whole, and
//     a delivery that holds a connection (the row lock and advisory forms, and every form in
//     transactional mode) holds it until it settles.
//
// A claim of single rows where deliveries hold no connection takes a row for every worker
// waiting or settling, so the claims that would run side by side share one statement and one
// commit; batches claim side by side, each for its own worker.
//
// # Writing a form
//
// A form is how rows are held while their handlers run; the packages rowlock, lease and advisory
// build the three this module has. Its contract with the consumer is the Form and BatchForm
// interfaces, the Binding a consumer opens it with, the Plan it answers, and five functions
// it calls on the deliveries it claims (SetHold, HoldOf, SetColumns, LendTx, TakeBackTx), all
// in one file, form.go. A form written outside this module can implement them, and the
// consumer drives it as it drives this module's; but until the module's first release that
// contract may change in any commit, and the CHANGELOG says when it does. internal/settleplan,
// which plans the statements of a unit's settlement, is this module's alone.
//
// # Guarantees
//
// A row is in work with at most one handler at a time while its form's hold stands: the row
// lock form's transaction, the lease form's unexpired lease, the advisory form's lock. A crash
// never loses a row: it returns to the queue at once (row lock, advisory) or when its lease runs
// out (lease). Delivery is at least once: a handler that ran but whose settlement did not commit
// runs again, unless its connection was lost, which returns the row as a crash does without
// counting an attempt against it. A row that keeps failing retries by Config.Retry and dies at
// Config.MaxAttempts: stamped dead_at with its last error, kept in its table, never claimed
// again; no delivery reads an Attempt past the limit (see the README's section on retries).
// In transactional mode the handler's own writes commit in the same transaction as the row's
// settlement, so its effects happen exactly once with the row's Ack.
package inbox
