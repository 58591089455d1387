package rowlock

import (
	"context"
	"database/sql"
	"errors"
	"slices"

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
			if f.d.Caps().Catalog == dialect.MySQLCatalog || f.t.Limits != "" || f.t.Rates != "" {
				return f.pickByID(ctx, tx, v, n, skip, m, &pass)
			}
			return f.pickHeads(ctx, tx, v, claim, n, skip, &pass)
		}
		ds, err := f.claimOnce(ctx, size, pick)
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
// examined (MySQL, MariaDB), and over limits and rates everywhere: it reads candidates without locking (sqltext.RowLock.Candidates)
// and locks them one at a time in claim order, each row's group first, then the row by its id,
// until it holds n, passing over busy and paused groups and rows another transaction holds.
// A group taken whose row is then gone (settled since the candidates were read) cannot be let
// go but by a rollback: the claim fails with errGroups, and runs again passing over that row
// (skip). So does a claim that met a group without its hold row, and one whose first row was
// refused a start slot after its lock; a batch's later row refused one stays locked in the
// batch's transaction, undelivered, its group held, until the batch ends (rolling back would
// spend the starts of the rows taken before it for nothing).
func (f *Form[D]) pickByID(ctx context.Context, tx dialect.Tx, v *sqltext.Values, n int, skip []int64, m *memo, pass *groupPass) ([]*inbox.Delivery, error) {
	if m.queueFull {
		return nil, nil
	}
	var ds []*inbox.Delivery
	for page := range pickPages {
		cands, err := f.candidates(ctx, tx, *v, page, m)
		if err != nil {
			return nil, err
		}
		for _, c := range cands {
			if slices.Contains(skip, c.id) {
				continue
			}
			d, err := f.takeCandidate(ctx, tx, *v, c, m, pass)
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
				if ds = append(ds, d); len(ds) == n {
					break
				}
			}
		}
		if len(ds) == n || len(cands) < sqltext.PickPage {
			break
		}
	}
	if len(pass.missing) > 0 {
		return nil, errGroups
	}
	return ds, nil
}

// takeCandidate takes candidate c in tx, as pickByID says. Before it locks anything it reads
// c's limits, and passes c over where one of its rates was found full in this claim (the rows
// of limits found full are not among the candidates): a row held back so costs no lock, and its
// group's hold is not taken for nothing. Then it takes c's group, its row by its id, a slot of
// each of its limits and a start slot of each of its rates. It returns the row's delivery, or
// none where c is passed over; errGroups, saying why in pass, where c leaves a group, a row or a
// slot held for nothing, which only the claim's rollback lets go: a start refused after the
// row's lock and its group's hold were taken rolls the claim back, and the claim runs again
// passing over that row (and, since it is still its group's head, over its group: the group's
// next row does not run in its place).
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
	if c.group.Valid {
		held, err := f.lockGroup(ctx, tx, v, c.group.String)
		if err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Row(f.t.Name, c.id), "taking the hold of its group %q: %w", c.group.String, err)
		}
		if held == groupMissing {
			pass.missing = append(pass.missing, c.group.String)
		}
		if held != groupTaken {
			return nil, nil
		}
	}
	lock := f.text.LockRow()
	w := v
	w.IDs = []int64{c.id}
	d, err := f.st.ScanOne(tx.QueryRowContext(ctx, lock.SQL, lock.Bind(nil, &w)...).Scan)
	switch {
	case errors.Is(err, sql.ErrNoRows) && c.group.Valid:
		pass.held = append(pass.held, c.id) // its group is held by this claim, for nothing
		return nil, errGroups
	case errors.Is(err, sql.ErrNoRows):
		return nil, nil // in work, or settled since the candidates were read
	case err != nil:
		return nil, err
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

// candidates reads the page-th page of candidates, leaving out the rows of the limits m found
// full.
func (f *Form[D]) candidates(ctx context.Context, tx dialect.Tx, v sqltext.Values, page int, m *memo) ([]candidate, error) {
	q := f.text.Candidates(page, len(m.fullKinds), len(m.fullKeys))
	v.FullKinds, v.FullKeys = m.fullKinds, m.fullKeys
	rows, err := tx.QueryContext(ctx, q.SQL, q.Bind(nil, &v)...)
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
	lock, seen := f.text.LockGroup(), f.text.GroupSeen()
	v.Group = g
	var paused any
	err := tx.QueryRowContext(ctx, lock.SQL, lock.Bind(nil, &v)...).Scan(&paused)
	switch {
	case err == nil && paused != nil:
		return groupPaused, nil
	case err == nil:
		return groupTaken, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, err
	}
	var one int
	switch err := tx.QueryRowContext(ctx, seen.SQL, seen.Bind(nil, &v)...).Scan(&one); {
	case errors.Is(err, sql.ErrNoRows):
		return groupMissing, nil
	case err != nil:
		return 0, err
	}
	return groupHeld, nil
}
