package lease

import (
	"cmp"
	"context"
	"database/sql"
	"slices"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sentinel"
	"github.com/sqlinbox/inbox/internal/sqltext"
)

// FIFO groups (inbox.Table.GroupKey). A claim takes only the head of each group whose hold no
// row's lease keeps, and takes the group's hold in its own transaction: on Postgres in its one
// statement (sqltext.Lease.Claim) where the table has no limits or rates, elsewhere by a
// statement per group between the pick and the stamp (takeGroups), before the limits' and the
// rates' slots (pickRated). A hold names its holder row and lasts as long as that row's lease, so
// extensions and settlements, which write only the row, extend and release it with the row.

// checkGroupOptions refuses the groups' options where they cannot work: either of them on a
// table without a group column, and GroupsStayBlocked on a table without a dead_at column,
// where a dying row is dropped, so that no dead row can stay its group's holder.
func (f *Form[D]) checkGroupOptions(queue string) error {
	where := sentinel.Queue(f.t.Name, queue)
	switch {
	case f.t.GroupKey == "" && (f.cfg.GroupsStayBlocked || f.cfg.GroupsRoundRobin):
		return sentinel.Errorf(inbox.ErrSchema, where, "lease.Config.GroupsStayBlocked and GroupsRoundRobin are options of FIFO groups, which the description does not have: name the group column in inbox.Table.GroupKey, or leave them unset")
	case f.cfg.GroupsStayBlocked && f.t.DeadAt == "":
		return sentinel.Errorf(inbox.ErrSchema, where, "lease.Config.GroupsStayBlocked keeps a group blocked by its dead head, but the description has no DeadAt column, so a dying row is dropped and cannot stay: add the column (inbox schema -dead-at prints it) and name it in inbox.Table.DeadAt, or leave GroupsStayBlocked unset")
	}
	return nil
}

// groupOptions is l with the groups' options of the form's configuration.
func (f *Form[D]) groupOptions(l sqltext.Lease) sqltext.Lease {
	if f.cfg.GroupsStayBlocked {
		l = l.StayBlocked()
	}
	if f.cfg.GroupsRoundRobin {
		l = l.RoundRobin()
	}
	return l
}

// seenHold is what a pick read of a claimed row's group: its key, and its hold's holder and
// token as the pick's statement saw them (not valid: the group had no hold row).
type seenHold struct {
	id     int64
	group  sql.NullString
	holder sql.NullInt64
	token  any
}

// scanPick reads the rows of a pick: deliveries and, where the table has groups, what the pick
// read of each one's group (sqltext.Lease.Claim's groupRead).
func (b *binding) scanPick(rows *sql.Rows) ([]*inbox.Delivery, []seenHold, error) {
	if b.st.Q.GroupKey == "" {
		ds, err := b.st.Scan(rows)
		return ds, nil, err
	}
	defer rows.Close()
	var ds []*inbox.Delivery
	var seen []seenHold
	for rows.Next() {
		var h seenHold
		d, err := b.st.ScanOne(func(dest ...any) error {
			return rows.Scan(append(dest, &h.group, &h.holder, &h.token)...)
		})
		if err != nil {
			return nil, nil, err
		}
		h.id = d.ID
		ds, seen = append(ds, d), append(seen, h)
	}
	return ds, seen, rows.Err()
}

// takeGroups takes, in tx, the hold of the group of each of ds that has one (in group order, so
// that two claims never wait for each other's holds), and returns those of ds that are of no
// group or whose group it took, in their order. A hold another claim took since the pick read it
// (TakeHeld changes no row, or TakeFree finds the key inserted) leaves its row unclaimed.
func (b *binding) takeGroups(ctx context.Context, tx dialect.Tx, ds []*inbox.Delivery, seen []seenHold, v sqltext.Values) ([]*inbox.Delivery, error) {
	if seen == nil {
		return ds, nil
	}
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(i, j int) int { return cmp.Compare(seen[i].group.String, seen[j].group.String) })
	taken := make([]bool, len(ds))
	for _, i := range order {
		h := seen[i]
		if !h.group.Valid {
			taken[i] = true
			continue
		}
		ok, err := b.take(ctx, tx, h, v)
		if err != nil {
			return nil, sentinel.Errorf(nil, sentinel.Row(b.st.Raw.Name, h.id), "taking the hold of its group %q: %w", h.group.String, err)
		}
		taken[i] = ok
	}
	out := ds[:0:0]
	for i, d := range ds {
		if taken[i] {
			out = append(out, d)
		}
	}
	return out, nil
}

// take takes the hold of h's group for its row, under v's token, and reports whether it did.
func (b *binding) take(ctx context.Context, tx dialect.Tx, h seenHold, v sqltext.Values) (bool, error) {
	v.IDs, v.Group = []int64{h.id}, h.group.String
	if !h.holder.Valid {
		res, err := b.takeFree.ExecIn(ctx, tx, b.takeFree.Bind(nil, &v)...)
		if dialect.DuplicateOn(err, "PRIMARY") {
			return false, nil // another claim took the group since the pick read it
		}
		if err != nil {
			return false, err
		}
		n, err := res.RowsAffected() // 0: Postgres's ON CONFLICT DO NOTHING, the same
		return n == 1, err
	}
	v.Holder, v.Tokens = h.holder.Int64, []any{h.token}
	res, err := b.takeHeld.ExecIn(ctx, tx, b.takeHeld.Bind(nil, &v)...)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// prepareTakes prepares (or, where the claim runs on a pinned connection by its text, checks)
// the statements that take a group's hold, where the claim does not take it in its own
// statement.
func (b *binding) prepareTakes(ctx context.Context) error {
	if b.st.Q.GroupKey == "" || b.sql.ClaimsInOne() {
		return nil
	}
	return b.prepareAll(ctx, []toPrepare{
		{"group take", b.sql.TakeHeld(), &b.takeHeld},
		{"group take of a new hold", b.sql.TakeFree(), &b.takeFree},
	})
}
