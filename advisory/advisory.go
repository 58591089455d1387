// Package advisory is the advisory lock form: a delivery holds a session-level advisory lock on
// its row's key, on a pooled connection pinned for the delivery. Postgres (11 or later, for
// hashtextextended), MySQL and MariaDB; SQLite has no session locks, so New does not compile
// with a SQLite dialect.
//
// # Keys
//
// The key (Config.Key) is a template of text and columns, such as "jobs-{id}" or
// "accounts-{account}"; without one it is the table's name, a dash and its id column, one lock
// per row. Rows whose keys match are never in work at once, and go into work in claim order: a
// key over an account column runs each account's rows one at a time while other accounts run
// in parallel. A column inside braces may be any column of the table, not only one the
// description names by role (an account column has no role); a column the table lacks fails
// Open with inbox.ErrSchema. A NULL column renders as empty text. The template's text may not
// hold quotes, backslashes or NUL bytes.
//
// Keys are database-wide: Postgres advisory locks span the database, and MySQL and MariaDB
// locks span the server (the form prefixes each lock name with the database's name). Start the
// template with the table's name, so that two tables' keys never meet. On Postgres the key is
// hashed to 64 bits (hashtextextended): two keys that collide only run one at a time, and they
// share the lock space with the application's own pg_advisory_lock(bigint) calls. On MySQL and
// MariaDB a lock name longer than 64 characters is replaced by its SHA-1.
//
// # What a claim does
//
// On Postgres a claim takes each row on its own pinned connection with one read that takes the
// lock of the first due row, in claim order, whose key is free (passing over keys held
// elsewhere inside the server, so that workers claiming at once never try the same key in
// turn); then, in a statement that starts after the lock is held, it re-checks that the row is
// still due with the same key and counts the attempt. On MySQL and MariaDB a claim selects due
// rows in claim order with their keys, passing over keys held elsewhere; then, for each, on its
// own pinned connection, it tries the key's lock without waiting and re-checks the row as
// above; a lock taken since the select by a claim beside it has the claim read again (at most
// four times), so that a claim comes back short only where no key was free. Either way a row
// settled by another holder between the read and the lock is passed over and its lock
// released. No transaction stays open while the handler runs
// (outside transactional mode); the lock and the pinned connection are the hold.
//
// Settlement runs on the delivery's connection: Ack and Drop delete the row (or stamp
// processed_at), RetryAfter sets retry_after, and Retry runs no statement, since the take
// counted the attempt. Then the lock is released and the connection goes back to the pool; a
// release the server does not confirm closes the connection instead, which ends the session and
// with it every lock it held. So does a transaction of transactional mode whose COMMIT or
// ROLLBACK fails (dialect.BeginOn): the row is back at once, unless the COMMIT's answer never
// came (inbox.ErrCommitUnknown), when it may be settled. A consumer that dies loses its
// sessions, and its rows are claimable again at once.
//
// # Durability
//
// On Postgres the take commits without waiting for the disk: its UPDATE turns synchronous_commit
// off for its own transaction (dialect.Caps.UnflushedCommit), which saves a flush (about a third
// of a millisecond on a local disk) per message. A server crash may forget it, which costs at
// most a second delivery with that attempt uncounted: the crash ends the session, and with it
// the lock. Settlements wait for the disk, except, where inbox.Config.UnflushedAcks asks, an Ack
// or a Drop outside transactional mode (a row's statement, and the one a batch settles its acks
// and drops by), whose row a crash may then deliver again. In transactional mode every
// settlement waits (an Ack commits the handler's writes), and a commit that waits makes the
// commits before it durable too (the server's log is one sequence). MySQL and MariaDB set
// durability for the whole server (innodb_flush_log_at_trx_commit): there the take and every
// settlement commit as it says.
//
// On MySQL and MariaDB the form runs its statements by their text on the pinned connection, and
// go-sql-driver/mysql prepares, runs and closes a statement with arguments at every run unless
// the DSN sets interpolateParams=true: with it a message costs 6 round trips instead of 11, and
// the form drained 1.4 to 1.5 times as fast (docs/benchmarks.md). The driver refuses the setting
// with the multibyte character sets BIG5, CP932, GB2312, GBK and SJIS.
//
// # Groups, limits and rates
//
// A table with FIFO groups (inbox.Table.GroupKey), concurrency limits (Limits) or rate limits
// (Rates) is held by the delivery's session too, so that each lives exactly as long as the row's
// lock, with no counter and nothing to sweep. A group is held by a session lock named from the
// table, the queue and the group key, taken before the row's key; the candidates are the heads
// of their groups whose lock is free (decided before the LIMIT), and once both locks are held a
// statement re-checks that the row still heads its group and its group is not paused (where the
// table inbox_groups exists, whose paused_at admin.PauseGroup writes). A limit of N is held by
// one of N slot locks, tried in turn; N is read from the limits table at each claim. A start is
// one of the rate's start slots, taken by a compare-and-set in autocommit once the row's locks
// are held and before its attempt is counted (a crash after it over-counts, which is safe). The
// form's lock names start with "inbox:": a key template must not render such a name. A claim of
// such a table selects candidates and locks them one by one, on every database. The lease form's
// GroupsStayBlocked and GroupsRoundRobin have no equivalent here (docs/groups.md says why). A
// full limit is found by a refused slot; the claim's later reads leave its rows out before
// their LIMIT (docs/limits.md).
//
// # Batches
//
// ClaimBatch holds a whole batch on one pinned connection: it selects candidates as a claim
// does, then on that one connection tries each candidate's lock and re-checks its row, until the
// batch is full or the candidates run out. A batch takes one row per key (the rows behind the
// first of a key wait for a later claim), so that each key is locked once and released once:
// session locks stack on Postgres and are reentrant on MySQL and MariaDB, and a key locked twice
// would need two releases. SettleBatch settles the rows on that connection with one statement per
// kind of outcome (Ack and Drop together, RetryAfter once per distinct delay, Retry none), then
// releases every key of the batch in one statement and gives the connection back; ReleaseBatch
// releases them without settling. In transactional mode the batch's deliveries lend one
// transaction on that connection, which commits with the settlements only when every outcome is
// Ack. Settle and Release refuse a delivery of a batch.
//
// Each delivery in work, or each batch, holds a pooled connection (Plan.HoldsConnection), so size
// the pool for the workers plus the application. Session locks need a session: behind PgBouncer
// in transaction pooling they do not hold, and the form must not be used there (Open refuses
// inbox.Config.UnpreparedStatements, the setting for that pooling).
package advisory

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/conflict"
	"github.com/sqlinbox/inbox/internal/formlife"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/settleplan"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/outcome"
)

// Dialect is what the advisory form needs from a dialect: session locks on a name. SQLite lacks
// them, so advisory.New on a SQLite dialect does not compile (the compiler's message names
// dialect.NoSessionLocksOnSQLiteUseLease: take package lease there).
type Dialect interface {
	dialect.Dialect
	SessionLocks() dialect.AdvisoryLocks
}

// candidateSlack is how many candidates a claim selects beyond the rows it asks for, so that a
// few rows lost to other consumers between the select and the lock do not leave it short.
const candidateSlack = 4

// closeTimeout bounds each lock release Close runs (Close has no context). A release that does
// not finish in time closes its connection, which releases the lock as well.
const closeTimeout = 5 * time.Second

// Form is the advisory lock form over one table. It implements inbox.BatchForm (and so
// inbox.Form); one consumer opens it at a time.
type Form[D Dialect] struct {
	d        D
	table    inbox.Table // as described: for messages, and the roles it names
	template string      // the key template, Config.Key or its default; Open parses it

	// life admits calls between Open and Close and keeps the holds in work, not yet settling,
	// which Close gives back before it frees the statements.
	life *formlife.Life[*hold]

	// Set by Open before it opens the form; read by the calls it admits. Close frees the
	// candidate select once no call uses it.
	db         *sql.DB
	q          inbox.Binding
	log        *slog.Logger
	candidates *stmt.Stmt
	t          *stmt.Table
	s          statements
	// claimed are the values every claim binds (the queue: stmt.Table.ClaimValues);
	// a claim's statements bind them with the rest set on a copy.
	claimed sqltext.Values
	shape   settleplan.Table
	fl      flows // the claims' groups, limits and rates (flows.go) // what the table records of an outcome, for settleplan
}

// statements is the text of the form's statements over its table, as internal/sqltext writes
// them: those of one row built once by Open, those of a batch by its size.
type statements struct {
	a sqltext.Advisory
	// acked builds the statements of an Ack (and of a Drop, which settles by the same): a, or
	// a.Unflushed() where the acks are unflushed.
	acked                    sqltext.Advisory
	lock, unlock, take, read sqltext.Statement // read is empty where take returns the row
	lockFirst                sqltext.Statement // empty where a read cannot take a lock (named locks)
	ack, retryAfter, dead    sqltext.Statement // retryAfter and dead are empty where the table lacks the column
	cancel                   sqltext.Statement // empty where the table lacks CancelledAt
}

// one is the statement that settles one row as kind k (Ack, RetryAfter, Fail or Cancel).
func (s statements) one(k outcome.Kind) sqltext.Statement {
	switch k {
	case outcome.KindAck:
		return s.ack
	case outcome.KindFail:
		return s.dead
	case outcome.KindCancel:
		return s.cancel
	}
	return s.retryAfter
}

// many is the statement that settles n rows as kind k (Ack, RetryAfter, Fail or Cancel).
func (s statements) many(k outcome.Kind, n int) sqltext.Statement {
	if k == outcome.KindAck {
		return s.acked.Settle(k, sqltext.ByIDs(n))
	}
	return s.a.Settle(k, sqltext.ByIDs(n))
}

// newStatements builds the statements over table t; with unflushedAcks its acks commit without
// waiting for the disk (inbox.Binding.UnflushedAcks outside transactional mode).
func newStatements(a sqltext.Advisory, t inbox.Table, unflushedAcks bool) statements {
	acked := a
	if unflushedAcks {
		acked = a.Unflushed()
	}
	s := statements{a: a, acked: acked, lock: a.Lock(), unlock: a.Unlock(), take: a.Take(), read: a.Read(),
		lockFirst: a.LockFirst(), ack: acked.Settle(outcome.KindAck, sqltext.ByID())}
	if t.RetryAfter != "" {
		s.retryAfter = a.Settle(outcome.KindRetryAfter, sqltext.ByID())
	}
	if t.DeadAt != "" {
		s.dead = a.Settle(outcome.KindFail, sqltext.ByID())
	}
	if t.CancelledAt != "" {
		s.cancel = a.Settle(outcome.KindCancel, sqltext.ByID())
	}
	return s
}

// Config configures the advisory form. A nil *Config, and the zero Config, take the defaults.
type Config struct {
	// Key is the template of each row's key (see Keys in the package documentation), such as
	// "accounts-{account}": text, and columns inside braces. Empty: "<table>-{<id>}", the
	// table's name, a dash and its id column ("jobs-{id}"), one lock per row; a quote,
	// backslash, brace or NUL byte of the table's name, which a template's text cannot hold,
	// is written as an underscore.
	Key string
}

// hold is the hold of one claim's rows: the pinned connection that holds their keys' locks, and
// the transaction lent to the handlers in transactional mode. A Claim's hold has one row; a
// ClaimBatch's has every row of the batch, one per key, so that each key is locked once and
// released once.
type hold struct {
	conn  *sql.Conn
	keys  []string   // keys[i] is ds[i]'s
	tx    dialect.Tx // begun on conn (dialect.BeginOn), which a failed end discards
	ds    []*inbox.Delivery
	batch bool
}

// For returns the advisory form over c's table, on c's database, locking each row on the key
// cfg.Key renders (nil: the defaults): the form a consumer of c (inbox.Client.NewConsumer)
// holds its rows by, as New returns it. It compiles only where the database has session locks.
func For[D Dialect](c *inbox.Client[D], cfg *Config) *Form[D] {
	return New(c.Dialect(), c.Table(), cfg)
}

// New returns the advisory form over table t, locking each row on the key cfg.Key renders (see
// Config). It never fails: Open checks the description and the key template.
func New[D Dialect](d D, t inbox.Table, cfg *Config) *Form[D] {
	key := defaultKey(t)
	if cfg != nil && cfg.Key != "" {
		key = cfg.Key
	}
	closed := sentinel.Errorf(inbox.ErrClosed, sentinel.Table(t.Name), "the advisory form is not open")
	return &Form[D]{d: d, table: t, template: key, life: formlife.New[*hold](closed)}
}

// defaultKey is Config.Key's default for table t: "<table>-{<id>}".
func defaultKey(t inbox.Table) string {
	name := strings.Map(func(r rune) rune {
		if strings.ContainsRune("'\\{}\x00", r) {
			return '_'
		}
		return r
	}, t.Name)
	return name + "-{" + t.ID + "}"
}

// Open checks the form against db and binds it to queue q until Close. Before any round trip
// to the server it checks the description (one t.Validate refuses, or a name the database would
// not keep) and the key template (unbalanced or empty braces, text a SQL literal cannot carry),
// each failing with inbox.ErrSchema naming the table (and the template); then the dialect's
// pair, the server's version, the type of every column the description names, the key
// template and every statement the form runs, prepared on the server. A missing table or
// column, including one the key names, or a column whose type breaks its role, fails with
// inbox.ErrSchema. q.UnpreparedStatements, the setting for a pooler in transaction mode, fails
// with inbox.ErrDialect: session locks do not hold there.
func (f *Form[D]) Open(ctx context.Context, db *sql.DB, q inbox.Binding) (inbox.Plan, error) {
	already := func() error {
		return sentinel.Errorf(inbox.ErrAlreadyConsuming, sentinel.Table(f.table.Name), "the advisory form is already open: build one form per consumer")
	}
	if err := f.life.Open(already, func() error { return f.bind(ctx, db, q) }); err != nil {
		return inbox.Plan{}, err
	}
	return inbox.Plan{Table: f.table.Name, Form: dialect.AdvisoryForm.String(), HoldsConnection: true, Dialect: f.d, Described: f.table, FindUnclaimable: f.FindUnclaimable}, nil
}

// bind checks the form against db and binds it to q, as Open says.
func (f *Form[D]) bind(ctx context.Context, db *sql.DB, q inbox.Binding) error {
	st, err := stmt.New(f.d, f.table)
	if err != nil {
		return err
	}
	key, err := parseKey(f.d, f.table.Name, f.template)
	if err != nil {
		return err
	}
	if err := f.d.Allows(dialect.AdvisoryForm); err != nil {
		return sentinel.At(sentinel.Queue(f.table.Name, q.Name), err)
	}
	if q.UnpreparedStatements {
		return sentinel.Errorf(inbox.ErrDialect, sentinel.Queue(f.table.Name, q.Name), "the advisory form cannot run with Config.UnpreparedStatements: connect directly or take another form; see docs/errors.md#dialect")
	}
	st.Claiming(q)
	a := st.SQL().Advisory(key)
	if err := f.d.CheckServer(ctx, db); err != nil {
		return sentinel.At(sentinel.Queue(f.table.Name, q.Name), err)
	}
	if err := dialect.CheckGalera(ctx, f.d, db, dialect.AdvisoryForm); err != nil {
		return sentinel.At(sentinel.Queue(f.table.Name, q.Name), err)
	}
	if f.d.Caps().Locks == dialect.HashedLocks {
		// Hashed locks hash each key with hashtextextended, which Postgres has since 11.
		if err := checkHashTextExtended(ctx, db); err != nil {
			return sentinel.At(sentinel.Queue(f.table.Name, q.Name), err)
		}
	}
	if err := schema.VerifyHolding(ctx, db, f.d, f.table, q); err != nil {
		return err
	}
	a, fl, err := f.bindFlows(ctx, db, q, st, a)
	if err != nil {
		return err
	}
	if err := st.Check(ctx, db, fmt.Sprintf("key template %q (the table must have every column it names)", f.template), a.KeyCheck()); err != nil {
		return err
	}
	candidates, err := st.Statement(ctx, db, "candidates", a.Candidates())
	if err != nil {
		return err
	}
	// The other statements run by their text on a pinned connection: prepared here only to
	// check them against the table. In transactional mode the ack commits the handler's writes,
	// which are the user's, so it waits.
	s := newStatements(a, f.table, q.UnflushedAcks && !q.Transactional)
	for _, n := range []struct {
		what string
		st   sqltext.Statement
	}{{"lock first", s.lockFirst}, {"lock", s.lock}, {"unlock", s.unlock}, {"take", s.take}, {"read", s.read},
		{"ack", s.ack}, {"retry after", s.retryAfter}, {"fail", s.dead}, {"group head", fl.head}} {
		if n.st.Empty() {
			continue
		}
		if err := st.Check(ctx, db, n.what, n.st.SQL); err != nil {
			candidates.Close()
			return err
		}
	}
	log := q.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	f.db, f.q, f.log, f.candidates = db, q, log, candidates
	f.t, f.s, f.claimed, f.fl = st, s, st.ClaimValues(q.Name), fl
	f.shape = settleplan.Table{
		ProcessedAt: f.table.ProcessedAt != "", DeadAt: f.table.DeadAt != "",
		RetryAfter: f.table.RetryAfter != "", LastError: f.table.LastError != "",
		CancelledAt: f.table.CancelledAt != "",
		// A retry writes nothing: the take counted the attempt, and the released lock is the retry.
	}
	return nil
}

// checkHashTextExtended refuses a Postgres server older than 11, which lacks hashtextextended.
func checkHashTextExtended(ctx context.Context, db *sql.DB) error {
	var num string
	if err := db.QueryRowContext(ctx, "SHOW server_version_num").Scan(&num); err != nil {
		return sentinel.Errorf(nil, "", "reading the Postgres server version: %w", err)
	}
	if n, _ := strconv.Atoi(num); n < 110000 {
		return sentinel.Errorf(inbox.ErrServerTooOld, "", "Postgres %s; the advisory form needs 11 or later (hashtextextended): upgrade the server, or take the row lock or lease form", num)
	}
	return nil
}

// candidate is a row the candidate select found, with its rendered key.
type candidate struct {
	id int64
	// keys is the key alone, as the statements over it bind it (sqltext.Values.Keys) and a hold
	// of its row alone keeps it: one slice of the select's, so that a row costs no slice of its
	// own.
	keys []string
	// Where the claim takes more than the row's lock (flows): the name of the row's group lock
	// (empty for a row of no group), its kind and its limit key (empty where it has none).
	group, kind, limitKey string
}

// key is c's rendered key.
func (c candidate) key() string { return c.keys[0] }

// Claim claims at most max due rows in claim order, each held by its key's lock on its own
// pooled connection. It takes one row per key (the others of that key wait their turn). A
// failure after some rows were taken is logged and the rows taken are returned.
func (f *Form[D]) Claim(ctx context.Context, max int) ([]*inbox.Delivery, error) {
	if max <= 0 {
		return nil, nil
	}
	if err := f.life.Enter(); err != nil {
		return nil, err
	}
	defer f.life.Leave()

	now := f.d.Time(f.q.Now())
	if !f.s.lockFirst.Empty() {
		return f.claimFirst(ctx, max, now)
	}
	cf, err := f.readFlows(ctx)
	if err != nil {
		return nil, err
	}
	var out []*inbox.Delivery
	for round := 0; ; {
		want := max - len(out) + candidateSlack
		full := len(cf.full)
		cands, err := f.selectCandidates(ctx, now, want, cf)
		var refused bool
		if err == nil {
			var taken []*inbox.Delivery
			taken, refused, err = f.takeCandidates(ctx, cands, max-len(out), now, cf)
			out = append(out, taken...)
		}
		if err != nil {
			if len(out) == 0 {
				return nil, err
			}
			f.log.Warn("inbox: advisory claim stopped early; returning the rows it took", "table", f.table.Name, "queue", f.q.Name, "taken", len(out), "err", err)
			return out, nil
		}
		// Slot locks are not readable in the select, so candidates under a full limit may fill
		// it: read again, leaving out the rows of the limits found full, so that a full limit
		// does not hold back the rows of others behind its own. Each such read finds one more
		// limit full, so it is not counted: a queue has few limits.
		further := len(cf.full) > full && len(cands) == want && !cf.queueFull()
		if len(out) == max || !(refused || further) || round == candidateSlack {
			return out, nil
		}
		if !further {
			// The select passes over held keys, so a lock refused since went to a claim running
			// beside this one: read again, so that a claim short of rows means no key was free,
			// not that workers claiming at once tried the same candidates in turn.
			round++
		}
	}
}

// takeCandidates takes at most max of cands in order, one row per key, and reports whether a
// lock was refused (a key taken elsewhere since the select). It passes over, without a round
// trip, the candidates of a limit it found full (cf.full).
func (f *Form[D]) takeCandidates(ctx context.Context, cands []candidate, max int, now any, cf *claimFlows) (out []*inbox.Delivery, refused bool, err error) {
	tried := map[string]bool{}
	for _, c := range cands {
		if len(out) == max {
			break
		}
		// Rows behind the first of a key wait for it, whether or not its lock is taken here.
		if tried[c.key()] {
			continue
		}
		tried[c.key()] = true
		if cf.fullFor(c) {
			continue
		}
		d, locked, err := f.take(ctx, c, now, cf)
		if err != nil {
			return out, refused, err
		}
		refused = refused || !locked
		if d != nil {
			out = append(out, d)
		}
	}
	return out, refused, nil
}

// selectCandidates reads at most limit candidates, leaving out the rows of the limits cf found
// full (run by its text then, a statement of its own for each set of limits).
func (f *Form[D]) selectCandidates(ctx context.Context, now any, limit int, cf *claimFlows) ([]candidate, error) {
	v := f.claimed
	v.Now, v.Limit, v.NowUs = now, limit, f.q.Now().UnixMicro()
	v.FullKinds, v.FullKeys = cf.fullKindsAndKeys()
	var rows *sql.Rows
	var err error
	if len(v.FullKinds)+len(v.FullKeys) == 0 {
		rows, err = f.candidates.QueryContext(ctx, f.candidates.Bind(nil, &v)...)
	} else {
		q := f.s.a.CandidatesNotFull(len(v.FullKinds), len(v.FullKeys))
		rows, err = f.db.QueryContext(ctx, q.SQL, q.Bind(nil, &v)...)
	}
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Queue(f.table.Name, f.q.Name), "selecting advisory candidates: %w", err)
	}
	defer rows.Close()
	var out []candidate
	// Each candidate's keys is its one key of these, made at the first row for the at most
	// limit rows the select returns (should the array grow, the keys read keep the old one).
	var keys []string
	for rows.Next() {
		var (
			c     candidate
			key   string
			group sql.NullString
			err   error
		)
		if f.fl.on() {
			err = rows.Scan(&c.id, &key, &group, &c.kind, &c.limitKey)
		} else {
			err = rows.Scan(&c.id, &key)
		}
		if err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "reading advisory candidates: %w", err)
		}
		if keys == nil {
			keys = make([]string, 0, limit)
		}
		keys = append(keys, key)
		c.keys, c.group = keys[len(keys)-1:len(keys):len(keys)], group.String
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Queue(f.table.Name, f.q.Name), "selecting advisory candidates: %w", err)
	}
	return out, nil
}

// claimFirst is Claim where a read can take a lock (sqltext.Advisory.LockFirst: Postgres): for
// each row, on a connection of its own, one statement takes the lock of the first due row whose
// key is free, and the take re-checks that row. Workers that claim at once never try the same
// key in turn, as they would over one list of candidates: each read passes over the keys the
// others took, inside the server. A row settled between a read and its lock is passed over (its
// lock released) and the read runs again, at most candidateSlack times a claim.
func (f *Form[D]) claimFirst(ctx context.Context, max int, now any) ([]*inbox.Delivery, error) {
	var out []*inbox.Delivery
	for gone := 0; len(out) < max && gone <= candidateSlack; {
		d, locked, err := f.takeFirst(ctx, now)
		if err != nil {
			if len(out) == 0 {
				return nil, err
			}
			f.log.Warn("inbox: advisory claim stopped early; returning the rows it took", "table", f.table.Name, "queue", f.q.Name, "taken", len(out), "err", err)
			break
		}
		switch {
		case !locked: // every due row's key is held
			return out, nil
		case d == nil:
			gone++
		default:
			out = append(out, d)
		}
	}
	return out, nil
}

// takeFirst pins a connection, takes on it the lock of the first due row whose key is free, then
// re-checks the row and counts the attempt. It reports whether it took a lock: false when every
// due row's key is held, and nil, true when the locked row was no longer due (its lock
// released); either way it gave the connection back.
func (f *Form[D]) takeFirst(ctx context.Context, now any) (*inbox.Delivery, bool, error) {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return nil, false, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "pinning a connection for a claim: %w", err)
	}
	v := f.claimed
	v.Now = now
	var (
		c   candidate
		key string
	)
	err = conn.QueryRowContext(ctx, f.s.lockFirst.SQL, f.s.lockFirst.Bind(nil, &v)...).Scan(&c.id, &key)
	if errors.Is(err, sql.ErrNoRows) {
		conn.Close()
		return nil, false, nil
	}
	if err != nil {
		// The server may have taken a lock before the error; only ending the session is sure
		// to release it.
		dialect.Discard(conn)
		return nil, false, sentinel.Errorf(nil, sentinel.Queue(f.table.Name, f.q.Name), "locking the first due row whose key is free: %w", err)
	}
	c.keys = []string{key}
	d, err := f.holdRow(ctx, conn, c, c.keys, now)
	return d, true, err
}

// take tries to hold candidate c: it pins a connection, tries c's lock without waiting, then
// re-checks the row and counts the attempt. It reports whether it took the lock, and returns a
// nil delivery when the key is held elsewhere or the row is no longer due, having given the
// connection back.
func (f *Form[D]) take(ctx context.Context, c candidate, now any, cf *claimFlows) (*inbox.Delivery, bool, error) {
	conn, err := f.db.Conn(ctx)
	if err != nil {
		return nil, false, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "pinning a connection for row %d: %w", c.id, err)
	}
	// The group's lock first, then the row's key: a group held elsewhere is passed over
	// without touching its rows' keys.
	held, locked, err := f.lockGroup(ctx, conn, c)
	if err == nil && locked {
		locked, err = f.lock(ctx, conn, c)
	}
	if err != nil {
		// The server may have taken the lock before the error; only ending the session is sure
		// to release it.
		dialect.Discard(conn)
		return nil, false, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "locking key %q of row %d: %w", c.key(), c.id, err)
	}
	if !locked {
		f.unlock(ctx, &hold{conn: conn, keys: held})
		return nil, false, nil
	}
	keys := append(held, c.key())
	if f.fl.on() {
		slots, ok, err := f.admit(ctx, conn, c, cf)
		keys = append(keys, slots...)
		if err != nil || !ok {
			f.unlock(ctx, &hold{conn: conn, keys: keys})
			return nil, true, err
		}
	}
	d, err := f.holdRow(ctx, conn, c, keys, now)
	return d, true, err
}

// holdRow takes candidate c's row on conn, which holds c's lock: it re-checks the row and counts
// the attempt, begins the handler's transaction in transactional mode, and keeps the hold. It
// returns nil, nil when the row is no longer due, having released the lock and given the
// connection back.
func (f *Form[D]) holdRow(ctx context.Context, conn *sql.Conn, c candidate, keys []string, now any) (*inbox.Delivery, error) {
	h := &hold{conn: conn, keys: keys}
	d, err := f.takeRow(ctx, conn, c, now)
	if err != nil || d == nil {
		f.unlock(ctx, h)
		return nil, err
	}
	if f.q.Transactional {
		// database/sql rolls a transaction back when its context ends; this one outlives the
		// claim.
		if h.tx, err = dialect.BeginOn(context.WithoutCancel(ctx), f.d, conn); err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "beginning the transaction of row %d: %w; %s", c.id, err, lockGone("the row is back in the queue, its attempt counted"))
		}
	}
	h.ds = []*inbox.Delivery{d}
	if err := f.keep(ctx, h); err != nil {
		return nil, err
	}
	return d, nil
}

// takeRow runs the take on the locked connection: a statement that starts after the lock is
// held, so it sees every settlement committed before; nil when the row is gone, settled or not
// due.
func (f *Form[D]) takeRow(ctx context.Context, conn *sql.Conn, c candidate, now any) (*inbox.Delivery, error) {
	v := f.claimed
	v.Now, v.IDs, v.Keys = now, []int64{c.id}, c.keys
	take, read := f.s.take, f.s.read
	var (
		d   *inbox.Delivery
		err error
	)
	if read.Empty() {
		d, err = f.t.ScanOne(conn.QueryRowContext(ctx, take.SQL, take.Bind(nil, &v)...).Scan)
	} else {
		var res sql.Result
		var n int64
		if res, err = conn.ExecContext(ctx, take.SQL, take.Bind(nil, &v)...); err == nil {
			if n, err = res.RowsAffected(); err == nil && n == 0 {
				return nil, nil
			}
		}
		if err == nil {
			d, err = f.t.ScanOne(conn.QueryRowContext(ctx, read.SQL, read.Bind(nil, &v)...).Scan)
		}
	}
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, sentinel.Errorf(nil, sentinel.Table(f.table.Name), "taking row %d: %w", c.id, err)
	}
	return d, nil
}

// FindUnclaimable searches the queue for rows that no claim takes as they stand (see
// inbox.Unclaimable), with reads of their own that lock nothing.
func (f *Form[D]) FindUnclaimable(ctx context.Context) ([]inbox.Unclaimable, error) {
	if err := f.life.Enter(); err != nil {
		return nil, err
	}
	defer f.life.Leave()
	return f.t.FindUnclaimable(ctx, f.db, f.q.Name, f.q.Now())
}

// Extend does nothing: a lock holds for as long as its session. d may be any delivery of a
// batch, which holds all of the batch's rows. It fails with inbox.ErrClosed when the hold has
// already ended.
func (f *Form[D]) Extend(ctx context.Context, d *inbox.Delivery) error {
	if h, _ := inbox.HoldOf[*hold](d); !f.life.Kept(h) {
		return f.ended(d)
	}
	return nil
}

// Settle applies o to the row on the delivery's connection, then releases the lock and gives
// the connection back. In transactional mode an Ack runs the settlement in the handler's
// transaction and commits both; any other outcome rolls the handler's writes back first. When
// the handler's transaction cannot settle (a statement of the handler's still runs on it,
// inbox.ErrTransactionHeld, or the database ended it under the handler,
// inbox.ErrTransactionEnded), nothing is settled, whatever the outcome: the transaction is
// rolled back and the lock released, and the row is claimable again, its attempt counted. It
// fails with inbox.ErrClosed when the hold had already ended (the form was closed, or the
// delivery was settled or released before): the row is back in the queue and nothing changed.
// A settlement statement that fails changes nothing either: the row returns when the lock is
// released, its attempt counted. A delivery of a batch is refused, changing nothing: its batch
// settles with SettleBatch.
func (f *Form[D]) Settle(ctx context.Context, d *inbox.Delivery, o outcome.Outcome) error {
	h, err := f.begin(d)
	if err != nil {
		return err
	}
	defer f.life.Leave()
	if h.tx != nil {
		if err := h.takeBack(); err != nil {
			f.giveBack(ctx, h)
			return err
		}
		if o.Kind() == outcome.KindAck {
			return f.commit(ctx, h, o)
		}
		if !f.rollback(h) {
			// The connection is gone, and with it the lock: the row is back, unsettled.
			return sentinel.Errorf(nil, sentinel.Table(f.table.Name), "rolling back the transaction of row %d failed, so it was not settled (%s); it is back in the queue", d.ID, o)
		}
	}
	if err = f.settleAlone(ctx, h.conn, d, o); err != nil {
		err = errors.Join(err, f.backOff(ctx, h.conn, d, err))
	}
	f.unlock(ctx, h)
	return err
}

// commit settles an Ack in the handler's transaction and commits the two together, then
// releases the lock.
func (f *Form[D]) commit(ctx context.Context, h *hold, o outcome.Outcome) error {
	if err := f.settle(ctx, h.tx, h.ds[0], o); err != nil {
		if !stmt.BacksOff(err) || f.q.Backoff == nil || !f.rollback(h) {
			f.giveBack(ctx, h)
			return err
		}
		// Rolled back, the lock still held on the connection: back the row off there.
		err = errors.Join(err, f.backOff(ctx, h.conn, h.ds[0], err))
		f.unlock(ctx, h)
		return err
	}
	if err := h.tx.Commit(); err != nil {
		return sentinel.Errorf(nil, sentinel.Table(f.table.Name), "committing the settlement of row %d with the handler's writes: %w; %s", h.ds[0].ID, err, lockGone(committed(err, "the row is")))
	}
	f.unlock(ctx, h)
	return nil
}

// lockGone says that a hold's connection was discarded, its transaction having failed to begin
// or end (see dialect.BeginOn), and what that means for its rows: what.
func lockGone(what string) string {
	return "the connection was closed, which released its locks: " + what
}

// committed says where the rows (rows: "the row is", "the rows are") of a transaction whose
// COMMIT failed with err stand: back in the queue, or, when the COMMIT's outcome is unknown,
// either settled with the handler's writes or back in the queue without them.
func committed(err error, rows string) string {
	if errors.Is(err, inbox.ErrCommitUnknown) {
		return rows + " either settled with the handler's writes or back in the queue without them"
	}
	return rows + " back in the queue, unsettled"
}

// Release gives the row back without an outcome: it rolls the handler's transaction back (in
// transactional mode), releases the lock and gives the connection back. The row is claimable at
// once, its attempt counted; a transaction a statement of the handler's still runs on is rolled
// back, and the lock released, once that statement is done (Release does not wait for it). It
// fails with inbox.ErrClosed when the hold had already ended. A delivery of a batch is refused,
// changing nothing: its batch is given back with ReleaseBatch.
func (f *Form[D]) Release(ctx context.Context, d *inbox.Delivery) error {
	h, err := f.begin(d)
	if err != nil {
		return err
	}
	defer f.life.Leave()
	f.giveBack(ctx, h)
	return nil
}

// takeBack ends the handlers' loan of h's transaction, if it has one, and reports why it cannot
// settle: inbox.ErrTransactionHeld or inbox.ErrTransactionEnded, or nil.
func (h *hold) takeBack() error {
	var first error
	for _, d := range h.ds {
		if err := inbox.TakeBackTx(d); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// giveBack rolls back h's transaction, if it has one, and releases its locks, giving the
// connection back (see unlock). A transaction a statement of the handler's still runs on is
// rolled back, and the locks released, once that statement is done, without waiting for it
// here: database/sql's Rollback waits for it, and the handler may run it for as long as it
// likes (a handler abandoned at shutdown, a goroutine it left behind). Such a give-back is
// counted among the calls in flight (formlife.Life.Go), so Close waits for it.
func (f *Form[D]) giveBack(ctx context.Context, h *hold) {
	if h.tx != nil && errors.Is(h.takeBack(), inbox.ErrTransactionHeld) {
		f.life.Go(func() {
			if f.rollback(h) {
				ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
				defer cancel()
				f.unlock(ctx, h)
			}
		})
		return
	}
	if h.tx == nil || f.rollback(h) {
		f.unlock(ctx, h)
	}
}

// begin takes d's hold from the form for its settlement or release, so that exactly one of
// them and Close ends it, and admits the call, which the caller ends with f.life.Leave.
func (f *Form[D]) begin(d *inbox.Delivery) (*hold, error) {
	h, _ := inbox.HoldOf[*hold](d)
	if h != nil && h.batch {
		return nil, sentinel.Errorf(nil, sentinel.Row(f.table.Name, d.ID), "the delivery is in a batch of %d rows: use SettleBatch or ReleaseBatch; nothing changed", len(h.ds))
	}
	// A closed form keeps no holds: its lock was released at Close.
	if kept, _ := f.life.Take(h, nil); !kept {
		return nil, f.ended(d)
	}
	return h, nil
}

func (f *Form[D]) ended(d *inbox.Delivery) error {
	return sentinel.Errorf(inbox.ErrClosed, sentinel.Row(f.table.Name, d.ID), "the delivery's lock was already released; nothing changed; see docs/errors.md#closed")
}

// execer is the delivery's connection, or its transaction.
type execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// settle runs the statement of outcome o, if it has one, through ex.
func (f *Form[D]) settle(ctx context.Context, ex execer, d *inbox.Delivery, o outcome.Outcome) error {
	if err := f.exec(ctx, ex, d, o); err != nil {
		return sentinel.Errorf(nil, sentinel.Table(f.table.Name), "settling row %d (%s): %w; the row returns to the queue", d.ID, o, err)
	}
	return nil
}

// settleAlone settles d by o through conn, the hold's connection, in a statement of its own
// (outside a handler's transaction). A transient conflict (on MySQL and MariaDB an ack that frees
// a unique key can be a deadlock victim against publishes of that key) runs it again: the lock
// still holds the row, and the statement changed nothing.
func (f *Form[D]) settleAlone(ctx context.Context, conn execer, d *inbox.Delivery, o outcome.Outcome) error {
	if err := conflict.Retry(ctx, f.d, func() error { return f.exec(ctx, conn, d, o) }); err != nil {
		return sentinel.Errorf(nil, sentinel.Table(f.table.Name), "settling row %d (%s): %w; the row returns to the queue", d.ID, o, err)
	}
	return nil
}

// exec runs the statement of outcome o, if it has one, through ex, and returns the database's
// error. A retry has none: the take counted the attempt, and releasing the lock hands the row
// back.
func (f *Form[D]) exec(ctx context.Context, ex execer, d *inbox.Delivery, o outcome.Outcome) error {
	step, ok := settleplan.One(f.shape, o, false)
	if o.Kind() == outcome.KindRetryAfter && step.Kind == outcome.KindRetry {
		f.log.Warn("inbox: RetryAfter on a table without a RetryAfter column: the row is retried at once; add the column to delay retries", "table", f.table.Name, "id", d.ID)
	}
	if !ok {
		return nil
	}
	v := f.shape.Values(step, f.q.Now(), f.d.Time)
	v.IDs = []int64{d.ID}
	s := f.s.one(step.Kind)
	_, err := ex.ExecContext(ctx, s.SQL, s.Bind(nil, &v)...)
	return err
}

// backOff applies the consumer's back-off (inbox.Binding.Backoff) to d's row through ex, the
// delivery's connection, when its settlement failed with err for a reason of its own (a
// statement the database refused, not a lost connection): the lock still holds the row, so a
// settlement that can never commit counts its attempts (the take counted this one) and waits
// like a retry. A death at the attempt limit that fails too leaves the row with its attempt at
// the limit, where no claim takes it again: the failure then wraps inbox.ErrDeathFailed. It
// returns the back-off's own failure, if any.
func (f *Form[D]) backOff(ctx context.Context, ex execer, d *inbox.Delivery, err error) error {
	if f.q.Backoff == nil || ctx.Err() != nil || !stmt.BacksOff(err) {
		return nil
	}
	o := f.q.Backoff(d, err)
	berr := f.exec(ctx, ex, d, o)
	if berr == nil {
		return nil
	}
	if o.Kind() == outcome.KindFail {
		if dead := f.t.DeathFailed(f.q.Name, d, berr); dead != nil {
			return dead
		}
	}
	return sentinel.Errorf(nil, sentinel.Row(f.table.Name, d.ID), "backing the row off after its failed settlement (%s): %w", o, berr)
}

// rollback rolls back h's transaction and reports whether its connection is still there to
// release the locks on: a failed rollback closes the connection (ending the transaction and
// the locks with the session).
func (f *Form[D]) rollback(h *hold) bool {
	if err := h.tx.Rollback(); err != nil {
		f.log.Warn("inbox: rolling back a delivery's transaction failed; closed its connection, which releases its lock", "table", f.table.Name, "ids", ids(h.ds), "err", err)
		return false
	}
	return true
}

// unlock releases every lock of h and returns its connection to the pool. A release the server
// does not confirm (the session did not hold a lock, or the statement failed) closes the
// connection instead: ending the session releases whatever it held, so no lock outlives the
// hold on a pooled connection.
func (f *Form[D]) unlock(ctx context.Context, h *hold) {
	ok, err := f.releaseKeys(ctx, h.conn, h.keys)
	if err == nil && ok {
		h.conn.Close()
		return
	}
	dialect.Discard(h.conn)
	if err == nil {
		// The session did not hold its locks: something between the library and the server
		// swapped sessions (PgBouncer in transaction pooling), and the keys were not protected.
		f.log.Warn("inbox: the server did not confirm an advisory unlock; closed the connection. The session had lost its lock: do not run the advisory form through a transaction-pooling proxy", "table", f.table.Name, "keys", h.keys)
		return
	}
	f.log.Warn("inbox: releasing an advisory lock failed; closed the connection, which releases it", "table", f.table.Name, "keys", h.keys, "err", err)
}

// releaseKeys releases the lock of each of keys once on conn, in one statement, and reports
// whether the server confirmed every release. Locks on one session stack (Postgres) or are
// reentrant (MySQL, MariaDB), so a key locked twice would need two releases: a hold locks each
// of its keys once.
func (f *Form[D]) releaseKeys(ctx context.Context, conn *sql.Conn, keys []string) (bool, error) {
	if len(keys) == 0 {
		return true, nil
	}
	v := sqltext.Values{Keys: keys}
	if len(keys) == 1 {
		return confirmed(conn.QueryRowContext(ctx, f.s.unlock.SQL, f.s.unlock.Bind(nil, &v)...))
	}
	many := f.s.a.UnlockMany(len(keys))
	var n int
	if err := conn.QueryRowContext(ctx, many.SQL, many.Bind(nil, &v)...).Scan(&n); err != nil {
		return false, err
	}
	return n == len(keys), nil
}

// confirmed reads the answer of a lock or unlock: true (Postgres) or 1 (MySQL, MariaDB).
// False, 0 and NULL are not.
func confirmed(row *sql.Row) (bool, error) {
	var ok sql.NullBool
	if err := row.Scan(&ok); err != nil {
		return false, err
	}
	return ok.Valid && ok.Bool, nil
}

// Close releases the locks of every delivery and batch still in work (rolling back their
// transactions; one a statement of the handler's still runs on, and its locks, once that
// statement is done) and waits for the claims, settlements and give-backs in flight; a settlement after it fails
// with inbox.ErrClosed. The form can be opened again.
func (f *Form[D]) Close() error {
	return f.life.Close(func(h *hold) error {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		f.giveBack(ctx, h)
		return nil
	}, func() error {
		err := f.candidates.Close()
		f.db, f.candidates = nil, nil
		return err
	})
}

// lock tries the lock of candidate c's key on conn without waiting, and reports whether it
// holds it now.
func (f *Form[D]) lock(ctx context.Context, conn *sql.Conn, c candidate) (bool, error) {
	v := sqltext.Values{Keys: c.keys}
	return confirmed(conn.QueryRowContext(ctx, f.s.lock.SQL, f.s.lock.Bind(nil, &v)...))
}
