package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
)

// FIFO groups (inbox.Table.GroupKey). The claim takes only the head of each group not paused
// (sqltext.RowLock.ClaimSkipping), and then, in its own transaction, the group's hold: the
// group's row of the table of group holds locked FOR UPDATE SKIP LOCKED (LockGroup). The hold
// thus ends with the transaction that holds the row, at the settlement's commit, a rollback, or
// the end of a dead process's session. The group's lock, not the head's id, excludes a second
// row of the group in work: ids are allocated before their rows commit, so a claim may see a
// later row as the head while a lower id is uncommitted, and a claim after that commit sees the
// lower id as the head while the later row is in work. A claim that meets such a head, whose
// group another transaction holds, rolls back and claims again passing over that row, up to
// groupTries times. A group without its hold row (its first claim) gets one in a statement of
// its own, outside the claim's transaction, and the claim runs again: nothing ever waits for a
// group's hold, and producers never touch the table.

// groupTries bounds the claims of one Claim (or ClaimBatch) that a group's hold row, a held
// group, a slot's row or a refused start sends back: each adds a row or passes over one more
// row. A claim sent back by a limit it found full is not counted (limits.go).
const groupTries = 8

// groupPass is what a claim over groups could not take: rows whose group another transaction
// holds, and groups that had no hold row yet.
type groupPass struct {
	held    []int64
	missing []string
	slots   []limit // limits whose slots below the limit lack rows (limits.go)
	tried   []int64 // the rows the claim tried (lockedRows)
}

func (g *groupPass) empty() bool { return len(g.held) == 0 && len(g.missing) == 0 && len(g.slots) == 0 }

// checkSideTables fails, where the description asks for them, when the table of group holds,
// the limits and slots tables or the rates table is missing or lacks a column (see
// schema.CheckGroups, CheckLimits, CheckRates).
func (f *Form[D]) checkSideTables(ctx context.Context, db *sql.DB, queue string) error {
	where := sentinel.Queue(f.t.Name, queue)
	if err := schema.CheckGroups(ctx, db, f.d, f.t, where); err != nil {
		return err
	}
	if err := schema.CheckLimits(ctx, db, f.d, f.t, where, true); err != nil {
		return err
	}
	return schema.CheckRates(ctx, db, f.d, f.t, where)
}

// picks are the statements of a claim over groups, limits or rates that run at every claim,
// prepared at Open (or checked, where the form runs its statements by their text): over groups
// the hold's lock and read (lockGroup); where the claim reads its candidates without a lock
// (pickByID) the row's lock, and over groups the window's candidates of a claim of one row. A
// statement run by its text costs a prepare, a round trip of its own on MySQL and MariaDB
// without interpolateParams, at each run. Each is nil where the claim does not run it.
type picks struct {
	window, lockRow, lockGroup, groupSeen *stmt.Stmt
}

// byID reports whether the claim reads its candidates without a lock (pickByID): over groups
// on MySQL and MariaDB, and over limits or rates everywhere.
func (f *Form[D]) byID() bool {
	return f.d.Caps().Catalog == dialect.MySQLCatalog || f.t.Limits != "" || f.t.Rates != ""
}

// preparePicks prepares, with prep, the picks the form's claims run.
func (f *Form[D]) preparePicks(r sqltext.RowLock, prep func(string, sqltext.Statement) *stmt.Stmt) picks {
	var p picks
	if f.t.GroupKey != "" {
		p.lockGroup, p.groupSeen = prep("group hold's lock", r.LockGroup()), prep("group hold's read", r.GroupSeen())
	}
	if f.byID() && (f.t.GroupKey != "" || f.t.Limits != "" || f.t.Rates != "") {
		p.lockRow = prep("candidate's lock", r.LockRow())
	}
	if f.byID() && f.t.GroupKey != "" {
		p.window = prep("candidates' window", r.WindowCandidates(1, 0, 0))
	}
	return p
}

// errGroups reports that a claim's transaction was rolled back for what its groupPass holds.
var errGroups = errors.New("inbox: the claim met groups it could not hold")

// claimGrouped runs the claim of up to max(size, 1) rows until it holds every group it returns,
// adding hold rows and passing over held rows as they come (see above). It returns no rows once
// groupTries claims were sent back, not counting those that found a limit full.
func (f *Form[D]) claimGrouped(ctx context.Context, claim *stmt.Stmt, size int) ([]*inbox.Delivery, error) {
	n := max(size, 1)
	var skip []int64
	m := &memo{fullRates: map[string]bool{}}
	for tries := 0; tries < groupTries; {
		full := m.fullLimits()
		var pass groupPass
		pick := func(tx dialect.Tx, v *sqltext.Values) ([]*inbox.Delivery, error) {
			if f.byID() {
				return f.pickByID(ctx, tx, v, n, skip, m, &pass)
			}
			return f.pickHeads(ctx, tx, v, claim, n, skip, &pass)
		}
		ds, err := f.claimOnce(ctx, size, pick)
		f.locked.release(&pass)
		if !errors.Is(err, errGroups) {
			return ds, err
		}
		if m.fullLimits() == full {
			tries++ // a run that found a limit full is not counted: the next leaves its rows out
		}
		skip = append(skip, pass.held...)
		if err := f.addSlots(ctx, pass.slots); err != nil {
			return nil, err
		}
		for _, g := range pass.missing {
			v := f.claimed
			v.Group = g
			if _, err := f.addGroup.ExecContext(ctx, f.addGroup.Bind(nil, &v)...); err != nil && !dialect.DuplicateOn(err, "PRIMARY") {
				return nil, sentinel.Errorf(nil, sentinel.Queue(f.t.Name, f.q.Name), "adding the hold row of group %q: %w", g, err)
			}
		}
	}
	return nil, nil
}

// pickHeads is the claim over groups where a locking read locks only the rows it returns
// (Postgres): one statement locks up to n heads (claim, or where rows are to be passed over its
// text with their ids, skip), then lockGroups takes their groups. It fails with errGroups, saying
// why in pass, where a group is not to be had.
func (f *Form[D]) pickHeads(ctx context.Context, tx dialect.Tx, v *sqltext.Values, claim *stmt.Stmt, n int, skip []int64, pass *groupPass) ([]*inbox.Delivery, error) {
	if len(skip) > 0 {
		claim = stmt.ByText(f.db, f.text.ClaimSkipping(n, len(skip)))
	}
	v.IDs = skip
	rows, err := claim.QueryIn(ctx, tx, claim.Bind(nil, v)...)
	if err != nil {
		return nil, err
	}
	ds, groups, err := f.scanGrouped(rows)
	if err != nil || len(ds) == 0 {
		return nil, err
	}
	for i, d := range ds {
		if !groups[i].Valid {
			continue
		}
		switch held, err := f.lockGroup(ctx, tx, *v, groups[i].String); {
		case err != nil:
			return nil, sentinel.Errorf(nil, sentinel.Row(f.t.Name, d.ID), "taking the hold of its group %q: %w", groups[i].String, err)
		case held == groupMissing:
			pass.missing = append(pass.missing, groups[i].String)
		case held != groupTaken:
			pass.held = append(pass.held, d.ID)
		}
	}
	if !pass.empty() {
		return nil, errGroups
	}
	return ds, nil
}

// pickPages bounds the pages of candidates (sqltext.PickPage rows each) one claim reads.
const pickPages = 16

// pickByID is the claim over groups where a locking read keeps the lock of every row it
// examined (MySQL, MariaDB), and over limits and rates everywhere: it reads candidates without
// locking (sqltext.RowLock.Candidates; over groups first those of a window of the first rows,
// WindowCandidates) and locks them one at a time in claim order, each row by its id, then its
// group, until it holds n, passing over busy and paused groups and rows another transaction
// holds. A row taken whose group another transaction holds (a lower id committed late, a
// group paused) cannot be let go but by a rollback: the claim fails with errGroups, and runs
// again passing over that row (skip). So does a claim that met a group without its hold row,
// and one whose first row was refused a start slot after its lock; a batch's later row refused
// one stays locked in the batch's transaction, undelivered, its group held, until the batch
// ends (rolling back would spend the starts of the rows taken before it for nothing).
func (f *Form[D]) pickByID(ctx context.Context, tx dialect.Tx, v *sqltext.Values, n int, skip []int64, m *memo, pass *groupPass) ([]*inbox.Delivery, error) {
	if m.queueFull {
		return nil, nil
	}
	var ds []*inbox.Delivery
	if f.t.GroupKey != "" {
		window := f.picks.window
		if n > 1 || m.fullLimits() > 0 {
			window = stmt.ByText(f.db, f.text.WindowCandidates(n, len(m.fullKinds), len(m.fullKeys)))
		}
		cands, err := f.candidates(ctx, tx, *v, window, m)
		if err != nil {
			return nil, err
		}
		if ds, err = f.takeCandidates(ctx, tx, *v, cands, n, ds, skip, m, pass); err != nil {
			return nil, err
		}
	}
	for page := 0; page < pickPages && len(ds) < n; page++ {
		cands, err := f.candidates(ctx, tx, *v, stmt.ByText(f.db, f.text.Candidates(page, len(m.fullKinds), len(m.fullKeys))), m)
		if err != nil {
			return nil, err
		}
		if ds, err = f.takeCandidates(ctx, tx, *v, cands, n, ds, skip, m, pass); err != nil {
			return nil, err
		}
		if len(cands) < sqltext.PickPage {
			break
		}
	}
	if len(pass.missing) > 0 {
		return nil, errGroups
	}
	return ds, nil
}

// lockedRows are the rows the form's claims try and lock, each with its owner: the claim's
// groupPass from the claim's try of the row until the claim ends, then the hold of a row it
// delivered until the end of that hold's transaction (a settlement's COMMIT, a rollback). In a
// queue that drains they are the first rows in claim order, each a candidate (a row lock cannot
// be seen without taking it) that the row's lock would refuse, a round trip each, to every
// other claim of the form, the concurrent ones first: pickByID passes over them. Passing over a
// row never takes it, so neither exclusion nor a group's order rests on this. The zero value is
// ready to use; it is safe for concurrent use.
type lockedRows struct {
	mu   sync.Mutex
	rows map[int64]any // by id: the *groupPass of the claim that tries it, or the *hold that delivered it
}

// try records that the claim of owner tries row id, unless a claim or a hold of the form has
// it (owner's own claim included), and reports whether it did.
func (l *lockedRows) try(id int64, owner *groupPass) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.rows[id]; ok {
		return false
	}
	if l.rows == nil {
		l.rows = map[int64]any{}
	}
	l.rows[id] = owner
	owner.tried = append(owner.tried, id)
	return true
}

// release forgets the rows owner's claim tried and did not deliver, once the claim has ended.
func (l *lockedRows) release(owner *groupPass) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range owner.tried {
		if l.rows[id] == owner {
			delete(l.rows, id)
		}
	}
}

// track records h's rows as locked until the end of its transaction, which a call of the cancel
// it returns (cancel wrapped) says: a hold's cancel is called once its transaction has ended,
// whatever ended it.
func (l *lockedRows) track(h *hold, cancel context.CancelFunc) context.CancelFunc {
	l.mu.Lock()
	if l.rows == nil {
		l.rows = map[int64]any{}
	}
	for _, d := range h.ds {
		l.rows[d.ID] = h
	}
	l.mu.Unlock()
	return func() {
		cancel()
		l.mu.Lock()
		for _, d := range h.ds {
			if l.rows[d.ID] == h {
				delete(l.rows, d.ID)
			}
		}
		l.mu.Unlock()
	}
}

// takeCandidates takes cands in order (takeCandidate), but those of skip, adding their rows to
// ds until it holds n. It fails with errGroups where pickByID says.
func (f *Form[D]) takeCandidates(ctx context.Context, tx dialect.Tx, v sqltext.Values, cands []candidate, n int, ds []*inbox.Delivery, skip []int64, m *memo, pass *groupPass) ([]*inbox.Delivery, error) {
	for _, c := range cands {
		if len(ds) == n {
			break
		}
		if slices.Contains(skip, c.id) || !f.locked.try(c.id, pass) {
			continue
		}
		d, err := f.takeCandidate(ctx, tx, v, c, m, pass)
		switch {
		case errors.Is(err, errStartRefused) && len(ds) == 0:
			pass.held = append(pass.held, c.id) // its row (group, slots) are held for nothing
			return nil, errGroups
		case errors.Is(err, errStartRefused):
			// A rollback would let it go, but also the rows taken before it, whose starts
			// are spent: each interval's slots would go to claims that roll back, and the
			// rate's rows would never run. It stays locked, its group held, until the batch
			// ends, undelivered.
			continue
		case err != nil:
			return nil, err
		}
		if d != nil {
			ds = append(ds, d)
		}
	}
	return ds, nil
}

// takeCandidate takes candidate c in tx, as pickByID says. Before it locks anything it reads
// c's limits, and passes c over where one of its rates was found full in this claim (the rows
// of limits found full are not among the candidates): a row held back so costs no lock, and its
// group's hold is not taken for nothing. Then it takes c's row by its id, its group, a slot of
// each of its limits and a start slot of each of its rates. The row goes first: a candidate in
// work (its group's holder locks it) or settled since the candidates were read is passed over
// by that one statement, holding nothing, where a group taken first would be held for nothing
// once the row was found gone, and only a rollback lets a group go. It returns the row's
// delivery, or none where c is passed over; errGroups, saying why in pass, where c leaves a
// row, a group or a slot held for nothing, which only the claim's rollback lets go: a group or
// a start refused after the row's lock rolls the claim back, and the claim runs again passing
// over that row (and, since it is still its group's head, over its group: the group's next
// row does not run in its place).
func (f *Form[D]) takeCandidate(ctx context.Context, tx dialect.Tx, v sqltext.Values, c candidate, m *memo, pass *groupPass) (*inbox.Delivery, error) {
	var ls []limit
	if f.t.Limits != "" {
		var err error
		if ls, err = f.limitsOf(ctx, tx, v, c.id); err != nil {
			return nil, err
		}
	}
	if f.t.Rates != "" && m.rateFull(c) {
		return nil, nil
	}
	w := v
	w.IDs = []int64{c.id}
	d, err := f.st.ScanOne(f.picks.lockRow.QueryRowIn(ctx, tx, f.picks.lockRow.Bind(nil, &w)...))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil // in work, or settled since the candidates were read
	case err != nil:
		return nil, err
	}
	if c.group.Valid {
		held, err := f.lockGroup(ctx, tx, v, c.group.String)
		switch {
		case err != nil:
			return nil, sentinel.Errorf(nil, sentinel.Row(f.t.Name, c.id), "taking the hold of its group %q: %w", c.group.String, err)
		case held == groupMissing:
			// The claim rolls back at the end of its pick (pickByID), letting the row go.
			pass.missing = append(pass.missing, c.group.String)
			return nil, nil
		case held != groupTaken:
			pass.held = append(pass.held, c.id) // its row is held by this claim, for nothing
			return nil, errGroups
		}
	}
	if ok, err := f.takeHolds(ctx, tx, v, c, d, ls, m, pass); err != nil || !ok {
		return nil, err
	}
	return d, nil
}

// takeHolds takes, for candidate c whose row d tx has locked, a slot of each of its limits ls,
// then a start slot of each of its rates. Where one is refused it fails with errGroups, c in
// pass.held: the row (its group, its slots) is held for nothing, and the claim must roll back.
func (f *Form[D]) takeHolds(ctx context.Context, tx dialect.Tx, v sqltext.Values, c candidate, d *inbox.Delivery, ls []limit, m *memo, pass *groupPass) (bool, error) {
	if len(ls) > 0 {
		ok, err := f.takeSlots(ctx, tx, v, c.id, ls, m, pass)
		if err != nil {
			return false, err
		}
		if !ok {
			pass.held = append(pass.held, c.id) // its row and slots are held for nothing
			return false, errGroups
		}
	}
	if f.t.Rates != "" {
		ok, err := f.takeStarts(ctx, v, d, c.key, m)
		if err != nil {
			return false, err
		}
		if !ok {
			return false, errStartRefused
		}
	}
	return true, nil
}

// errStartRefused reports that a candidate, locked with its group and slots, was refused a start
// slot: see pickByID.
var errStartRefused = errors.New("inbox: a start slot refused after the row's lock")

// candidate is a row Candidates read: its id, group, and (where the table has rates) its kind
// and limit key.
type candidate struct {
	id               int64
	group, kind, key sql.NullString
}

// candidates reads the candidates of q (a page of Candidates, or WindowCandidates) built
// for m's full limits, whose rows it leaves out.
func (f *Form[D]) candidates(ctx context.Context, tx dialect.Tx, v sqltext.Values, q *stmt.Stmt, m *memo) ([]candidate, error) {
	v.FullKinds, v.FullKeys = m.fullKinds, m.fullKeys
	rows, err := q.QueryIn(ctx, tx, q.Bind(nil, &v)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []candidate
	for rows.Next() {
		var c candidate
		if err := rows.Scan(&c.id, &c.group, &c.kind, &c.key); err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// scanGrouped reads the rows of a claim over groups: the deliveries and each one's group key
// (NULL: none).
func (f *Form[D]) scanGrouped(rows *sql.Rows) ([]*inbox.Delivery, []sql.NullString, error) {
	defer rows.Close()
	var ds []*inbox.Delivery
	var groups []sql.NullString
	for rows.Next() {
		var g sql.NullString
		d, err := f.st.ScanOne(func(dest ...any) error { return rows.Scan(append(dest, &g)...) })
		if err != nil {
			return nil, nil, err
		}
		ds, groups = append(ds, d), append(groups, g)
	}
	return ds, groups, rows.Err()
}

// What lockGroup found of a group's hold.
type groupHold int

const (
	groupTaken   groupHold = iota // this claim's transaction holds it now
	groupHeld                     // another transaction holds it
	groupPaused                   // paused since the claim read the group
	groupMissing                  // it has no hold row yet
)

// lockGroup takes, in tx, the hold of group g: its hold row locked FOR UPDATE SKIP LOCKED; where
// that finds none, a plain read, which waits for no lock, tells a held group from one without a
// hold row. v binds the table's name and the queue.
func (f *Form[D]) lockGroup(ctx context.Context, tx dialect.Tx, v sqltext.Values, g string) (groupHold, error) {
	lock, seen := f.picks.lockGroup, f.picks.groupSeen
	v.Group = g
	var paused any
	err := lock.QueryRowIn(ctx, tx, lock.Bind(nil, &v)...)(&paused)
	switch {
	case err == nil && paused != nil:
		return groupPaused, nil
	case err == nil:
		return groupTaken, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, err
	}
	var one int
	switch err := seen.QueryRowIn(ctx, tx, seen.Bind(nil, &v)...)(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return groupMissing, nil
	case err != nil:
		return 0, err
	}
	return groupHeld, nil
}
