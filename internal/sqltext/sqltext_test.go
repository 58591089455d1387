package sqltext_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/schema"
	"github.com/sqlinbox/inbox/internal/sqlshape"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
)

// TestGoldens builds, through the package's builders, every statement of every golden file and
// checks that each file holds exactly that text. The forms and the wake-ups run what these
// builders build, so their files are written here (-update); publishing's files are what
// publishing builds today (its own golden test writes and checks them), so its builder builds
// the same SQL, byte for byte. A golden file no builder renders fails too.
func TestGoldens(t *testing.T) {
	rendered := map[string]bool{}
	for _, dl := range golden.Dialects {
		c := dl.D.Caps()
		for _, sh := range golden.Shapes {
			s, lease, key := quoted(t, dl.D, sh)
			forms := map[string][]golden.Entry{
				"lease":       leaseEntries(c, s.Lease(lease)),
				"publish":     publishEntries(c, s, own(t, dl.D, sh)),
				"wakeup":      wakeupEntries(s, dl.Name),
				"unclaimable": unclaimableEntries(s),
				"schema":      schemaEntries(t, dl.D, sh),
				"ticks":       ticksEntries(t, dl.D, sh),
				"retention":   retentionEntries(c, s, sh.Table),
				"pauses":      pausesEntries(c, s, sh.Table),
				"limits":      limitsEntries(c, s, lease),
				"rates":       ratesEntries(s, sh.Table),
			}
			if c.SkipLocked {
				forms["rowlock"] = rowLockEntries(c, s.RowLock())
			}
			if sh.Table.RetryAfter != "" {
				forms["reschedule"] = rescheduleEntries(c, s.Reschedule(lease))
			}
			if sh.Table.CancelledAt != "" {
				forms["cancel"] = cancelEntries(c, s.Cancels(lease))
			}
			if c.Locks != dialect.NoSessionLocks && sh.Table.GroupKey == "" && sh.Table.Limits == "" {
				forms["advisory"] = advisoryEntries(c, s.Advisory(key), sh.Table.DeadAt != "")
			}
			if sh.Table.UniqueKey != "" {
				forms["unique"] = uniqueEntries(c, s.Unique(lease))
			}
			if sh.Table.Attempt != "" {
				// The attempt limit changes what a claim takes where the table counts attempts.
				limited(forms, c, s.Limited(goldenMaxAttempts), lease, key, "max attempts 25")
			}
			if sh.Table.Kind != "" {
				// A consumer of kinds (inbox.Kinds) claims its kinds alone, each below its own
				// limit: of two kinds, one under its own limit and one under the consumer's; of
				// four, one unlimited, one under its own, two under the consumer's (one IN list),
				// one of them a name with a quote and a backslash, written by the database's
				// rules for a literal (dialect.Caps.Literal). The lease form's claim of three
				// kinds of one limit, which SQLite looks up in one literal rather than an IN list
				// (Caps.InListTempIndex), and of three of which one holds the separator of that
				// literal: an IN list again.
				limited(forms, c, s.OfKinds([]sqltext.Kind{{"report", 3}, {"email", 25}}), lease, key, "kinds 3, 25")
				limited(forms, c, s.OfKinds([]sqltext.Kind{{"cleanup", 0}, {"report", 3}, {"email", 25}, {`it's\odd`, 25}}), lease, key, "kinds 0, 3, 25, 25")
				three := []sqltext.Kind{{"cleanup", 0}, {"report", 0}, {`it's\odd`, 0}}
				forms["lease"] = append(forms["lease"], limitedLeaseEntries(c, s.OfKinds(three).Lease(lease), "kinds 0, 0, 0")...)
				three[2].Name = "a,b"
				forms["lease"] = append(forms["lease"], limitedLeaseEntries(c, s.OfKinds(three).Lease(lease), "kinds 0, 0, 0, one with a comma")...)
			}
			// The advisory form's groups, limits and rates (after limited, which builds the
			// claims of a table without them).
			advisoryFlows(forms, c, s, sh.Table, key)
			for form, e := range forms {
				switch {
				case len(e) == 0 || !sh.Covers(form):
					continue
				case form != "publish":
					// The consumer and the forms run these as this package builds them: their
					// builders are their source, and -update writes them here.
					golden.Pin(t, form, dl.Name, sh.Name, e)
				default:
					golden.Match(t, form, dl.Name, sh.Name, e)
				}
				rendered[golden.Path(form, dl.Name, sh.Name)] = true
			}
		}
	}
	for _, path := range adminGoldens(t) {
		rendered[path] = true
	}
	files, err := golden.Files()
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden files under %s (%v)", golden.Dir(), err)
	}
	for _, f := range files {
		if !rendered[f] {
			t.Errorf("%s: no builder renders this golden file; delete it, or build its statements", f)
		}
	}
}

// own is shape sh's own columns quoted for d: the golden publishing sets each of them.
func own(t testing.TB, d dialect.Dialect, sh golden.Shape) []string {
	t.Helper()
	q, err := inbox.Table(sh.Table).Quote(d)
	if err != nil {
		t.Fatalf("%s, %s: %v", d.Name(), sh.Name, err)
	}
	return q.Columns
}

// quoted is shape sh on dialect d: its statements' builder, its lease column and its key, every
// name quoted.
func quoted(t testing.TB, d dialect.Dialect, sh golden.Shape) (sqltext.SQL, string, []sqltext.KeyPart) {
	t.Helper()
	q, err := inbox.Table(sh.Table).Quote(d)
	if err != nil {
		t.Fatalf("%s, %s: %v", d.Name(), sh.Name, err)
	}
	lease, err := d.Quote(sh.Lease)
	if err != nil {
		t.Fatalf("%s, %s: %v", d.Name(), sh.Name, err)
	}
	key := slices.Clone(sh.Key)
	for i := range key {
		if key[i].Column != "" {
			if key[i].Column, err = d.Quote(key[i].Column); err != nil {
				t.Fatalf("%s, %s: %v", d.Name(), sh.Name, err)
			}
		}
	}
	return sqltext.New(d.Caps(), sqltext.Table(q)), lease, key
}

// schemaEntries are the statements that create shape sh's table on d (schema.Create, which
// inbox schema prints), with the lease column: the CREATE TABLE, its line breaks taken out (a
// golden statement is one line), and the claim index where it is a statement of its own.
func schemaEntries(t *testing.T, d dialect.Dialect, sh golden.Shape) []golden.Entry {
	t.Helper()
	sts, err := schema.Create(d, inbox.Table(sh.Table), sh.Lease)
	if err != nil {
		t.Fatalf("%s, %s: %v", d.Name(), sh.Name, err)
	}
	var e entries
	for i, st := range sts {
		name := "create table"
		if i > 0 && !strings.HasPrefix(st, "CREATE TABLE") {
			name = "create index"
		}
		e.addText(name, strings.NewReplacer("(\n    ", "(", ",\n    ", ", ", "\n)", ")").Replace(st))
	}
	return e
}

// entries collects named statements, leaving out the empty ones (a statement the table or the
// database does not have).
type entries []golden.Entry

// add adds a statement built with the roles of its parameters, which its entry lists.
func (e *entries) add(name string, st sqltext.Statement) {
	if !st.Empty() {
		*e = append(*e, golden.Entry{Name: name, SQL: st.SQL, Args: st.ArgList()})
	}
}

// addText adds a statement whose caller binds by its own rule: its entry lists no roles.
func (e *entries) addText(name, sql string) {
	if sql != "" {
		*e = append(*e, golden.Entry{Name: name, SQL: sql})
	}
}

func rowLockEntries(c *dialect.Caps, r sqltext.RowLock) []golden.Entry {
	var e entries
	e.add("claim", r.Claim(1))
	e.add("claim(3)", r.Claim(3))
	e.add("ack", r.Settle(outcome.KindAck, sqltext.ByID()))
	e.add("retry", r.Settle(outcome.KindRetry, sqltext.ByID()))
	e.add("retryAfter", r.Settle(outcome.KindRetryAfter, sqltext.ByID()))
	e.add("fail", r.Settle(outcome.KindFail, sqltext.ByID()))
	e.add("relock", r.Relock())
	e.add("cancel", r.Settle(outcome.KindCancel, sqltext.ByID()))
	if c.IDListSettles {
		e.add("ackIn(3)", r.Settle(outcome.KindAck, sqltext.ByIDs(3)))
		e.add("retryIn(3)", r.Settle(outcome.KindRetry, sqltext.ByIDs(3)))
		e.add("retryAfterIn(3)", r.Settle(outcome.KindRetryAfter, sqltext.ByIDs(3)))
		e.add("failIn(3)", r.Settle(outcome.KindFail, sqltext.ByIDs(3)))
		e.add("cancelIn(3)", r.Settle(outcome.KindCancel, sqltext.ByIDs(3)))
	}
	e.add("savepoint", r.Savepoint())
	e.add("rollbackToSavepoint", r.RollbackToSavepoint())
	if r.HasGroups() {
		e.add("claim skipping 2", r.ClaimSkipping(1, 2))
		e.add("lockGroup", r.LockGroup())
		e.add("groupSeen", r.GroupSeen())
		e.add("addGroup", r.AddGroup())
		if c.Catalog == dialect.MySQLCatalog {
			e.add("candidates page 0", r.Candidates(0, 0, 0))
			e.add("candidates page 2", r.Candidates(2, 0, 0))
			e.add("window candidates", r.WindowCandidates(1, 0, 0))
			e.add("window candidates of 3", r.WindowCandidates(3, 0, 0))
			e.add("lockRow", r.LockRow())
		}
	}
	if r.HasRates() && !r.HasLimits() {
		e.add("candidates page 1", r.Candidates(1, 0, 0))
		e.add("lockRow", r.LockRow())
	}
	if r.HasLimits() {
		e.add("candidates page 1", r.Candidates(1, 0, 0))
		e.add("candidates page 0, a kind's and 2 keys' limits full", r.Candidates(0, 1, 2))
		e.add("lockRow", r.LockRow())
		e.add("rowLimits", r.RowLimits())
		e.add("lockSlot", r.LockSlot())
		e.add("slotsThere", r.SlotsThere())
		e.add("addSlot", r.AddSlot())
	}
	if c.UnflushedCommit != "" {
		u := r.Unflushed()
		e.add("ack unflushed", u.Settle(outcome.KindAck, sqltext.ByID()))
		e.add("ackIn(3) unflushed", u.Settle(outcome.KindAck, sqltext.ByIDs(3)))
	}
	return e
}

func leaseEntries(c *dialect.Caps, l sqltext.Lease) []golden.Entry {
	var e entries
	e.add("claim", l.Claim(1))
	if c.UpdateFrom {
		e.add("claim(3)", l.Claim(3)) // the limit in its text; the pick binds it
	}
	e.add("stamp(1)", l.Stamp(1))
	e.add("stamp(3)", l.Stamp(3))
	e.add("group take", l.TakeHeld())
	e.add("group take of a new hold", l.TakeFree())
	if !l.TakeFree().Empty() {
		e.add("group holds' check", sqltext.CheckGroups())
		e.addText("group holds' table", sqltext.CreateGroups(c))
		e.addText("group holds' paused_at", sqltext.AddGroupsPaused(c))
		e.add("claim, groups stay blocked", l.StayBlocked().Claim(1))
		e.add("claim, groups round robin", l.RoundRobin().Claim(1))
		e.add("claim heads(3)", l.ClaimHeads(3)) // Postgres: after a short claim
		e.add("claim heads, groups stay blocked", l.StayBlocked().ClaimHeads(1))
	}
	e.add("slots read", l.ReadSlots())
	e.add("slot take", l.TakeSlot())
	e.add("slot take of a new slot", l.NewSlot())
	e.add("extend", l.Extend(sqltext.ByIDAndToken()))
	e.add("ack", l.Settle(outcome.KindAck, sqltext.ByIDAndToken()))
	e.add("retry", l.Settle(outcome.KindRetry, sqltext.ByIDAndToken()))
	e.add("retryAfter", l.Settle(outcome.KindRetryAfter, sqltext.ByIDAndToken()))
	e.add("fail", l.Settle(outcome.KindFail, sqltext.ByIDAndToken()))
	e.add("cancel", l.Settle(outcome.KindCancel, sqltext.ByIDAndToken()))
	e.add("extendIn(3)", l.Extend(sqltext.ByIDsAndToken(3)))
	e.add("ackIn(3)", l.Settle(outcome.KindAck, sqltext.ByIDsAndToken(3)))
	e.add("retryIn(3)", l.Settle(outcome.KindRetry, sqltext.ByIDsAndToken(3)))
	e.add("retryAfterIn(3)", l.Settle(outcome.KindRetryAfter, sqltext.ByIDsAndToken(3)))
	e.add("failIn(3)", l.Settle(outcome.KindFail, sqltext.ByIDsAndToken(3)))
	e.add("cancelIn(3)", l.Settle(outcome.KindCancel, sqltext.ByIDsAndToken(3)))
	if c.Returning {
		e.add("ackPairs(2)", l.Settle(outcome.KindAck, sqltext.ByPairs(2)))
		e.add("retryPairs(2)", l.Settle(outcome.KindRetry, sqltext.ByPairs(2)))
		e.add("ackIn(3) returning", l.SettleReturning(outcome.KindAck, 3))
		e.add("retryIn(3) returning", l.SettleReturning(outcome.KindRetry, 3))
		e.add("retryAfterIn(3) returning", l.SettleReturning(outcome.KindRetryAfter, 3))
		e.add("failIn(3) returning", l.SettleReturning(outcome.KindFail, 3))
		e.add("cancelIn(3) returning", l.SettleReturning(outcome.KindCancel, 3))
	}
	e.add("heldIn(3)", l.Held(3))
	if c.UnflushedCommit != "" {
		u := l.Unflushed()
		e.add("ack unflushed", u.Settle(outcome.KindAck, sqltext.ByIDAndToken()))
		e.add("ackPairs(2) unflushed", u.Settle(outcome.KindAck, sqltext.ByPairs(2)))
		e.add("ackIn(3) returning unflushed", u.SettleReturning(outcome.KindAck, 3))
	}
	return e
}

func advisoryEntries(c *dialect.Caps, a sqltext.Advisory, dead bool) []golden.Entry {
	var e entries
	e.addText("keyCheck", a.KeyCheck())
	e.add("candidates", a.Candidates())
	e.add("lockFirst", a.LockFirst())
	e.add("lock", a.Lock())
	e.add("unlock", a.Unlock())
	e.add("take", a.Take())
	e.add("read", a.Read())
	e.add("ack", a.Settle(outcome.KindAck, sqltext.ByID()))
	e.add("retryAfter", a.Settle(outcome.KindRetryAfter, sqltext.ByID()))
	if dead {
		e.add("fail", a.Settle(outcome.KindFail, sqltext.ByID()))
	}
	e.add("cancel", a.Settle(outcome.KindCancel, sqltext.ByID()))
	e.add("unlockMany(3)", a.UnlockMany(3))
	e.add("ackMany(3)", a.Settle(outcome.KindAck, sqltext.ByIDs(3)))
	e.add("retryAfterMany(3)", a.Settle(outcome.KindRetryAfter, sqltext.ByIDs(3)))
	if dead {
		e.add("failMany(3)", a.Settle(outcome.KindFail, sqltext.ByIDs(3)))
	}
	e.add("cancelMany(3)", a.Settle(outcome.KindCancel, sqltext.ByIDs(3)))
	if c.UnflushedCommit != "" {
		u := a.Unflushed()
		e.add("ack unflushed", u.Settle(outcome.KindAck, sqltext.ByID()))
		e.add("ackMany(3) unflushed", u.Settle(outcome.KindAck, sqltext.ByIDs(3)))
	}
	return e
}

// goldenMaxAttempts is the attempt limit of the golden files' limited claims (SQL.Limited).
const goldenMaxAttempts = 25

// limited adds to forms the statements that say which rows are claimable, built by s (Limited
// or OfKinds), each named for what limits it (label).
func limited(forms map[string][]golden.Entry, c *dialect.Caps, s sqltext.SQL, lease string, key []sqltext.KeyPart, label string) {
	forms["lease"] = append(forms["lease"], limitedLeaseEntries(c, s.Lease(lease), label)...)
	forms["unclaimable"] = append(forms["unclaimable"], limitedUnclaimableEntries(s.Unclaimable(1001), label)...)
	if forms["rowlock"] != nil { // the row lock form's, which a table with groups has not
		forms["rowlock"] = append(forms["rowlock"], limitedRowLockEntries(s.RowLock(), label)...)
	}
	if forms["advisory"] != nil {
		forms["advisory"] = append(forms["advisory"], limitedAdvisoryEntries(s.Advisory(key), label)...)
	}
}

// The statements that a limit changes (SQL.Limited, SQL.OfKinds): those that say which rows
// are claimable, each named for the limit.
func limitedRowLockEntries(r sqltext.RowLock, label string) []golden.Entry {
	var e entries
	e.add("claim, "+label, r.Claim(1))
	e.add("claim(3), "+label, r.Claim(3))
	return e
}

func limitedLeaseEntries(c *dialect.Caps, l sqltext.Lease, label string) []golden.Entry {
	var e entries
	e.add("claim, "+label, l.Claim(1))
	if c.UpdateFrom {
		e.add("claim(3), "+label, l.Claim(3))
	}
	return e
}

func limitedAdvisoryEntries(a sqltext.Advisory, label string) []golden.Entry {
	var e entries
	e.add("candidates, "+label, a.Candidates())
	e.add("lockFirst, "+label, a.LockFirst())
	e.add("take, "+label, a.Take())
	return e
}

func limitedUnclaimableEntries(u sqltext.Unclaimable, label string) []golden.Entry {
	var e entries
	e.add("exhausted, "+label, u.Exhausted())
	return e
}

// On Postgres (notifying) a publish to a table with Notify set also notifies its channel. Where
// VALUES take DEFAULT, three rows of which the second leaves the last own column out and the
// third sets only that one.
func publishEntries(c *dialect.Caps, s sqltext.SQL, own []string) []golden.Entry {
	var e entries
	e.addText("insert(1)", s.Insert(1, own))
	e.addText("insert(3)", s.Insert(3, own))
	if c.ValuesDefault && len(own) > 1 {
		e.addText("insert(3) sparse", s.InsertSparse(own, golden.Sparse(len(own))))
	}
	e.addText("insertID", s.InsertID(own))
	if s.HasUniqueKey() {
		e.addText("insert unique", s.Unique("").Insert(own))
	}
	if c.Notifies {
		e.addText("insert(1) notifying", s.InsertNotifying(1, own))
		e.addText("insert(3) notifying", s.InsertNotifying(3, own))
	}
	return e
}

// TestSettlementKinds: Drop settles as Ack and the zero kind as Retry in every form, and the
// advisory form's retry runs no statement (its take counted the attempt).
func TestSettlementKinds(t *testing.T) {
	for _, dl := range golden.Dialects {
		c := dl.D.Caps()
		s, lease, key := quoted(t, dl.D, golden.Shapes[0])
		type settle func(outcome.Kind) string
		forms := map[string]settle{
			"lease": func(k outcome.Kind) string { return s.Lease(lease).Settle(k, sqltext.ByIDAndToken()).SQL },
		}
		if c.SkipLocked {
			forms["rowlock"] = func(k outcome.Kind) string { return s.RowLock().Settle(k, sqltext.ByID()).SQL }
		}
		if c.Locks != dialect.NoSessionLocks {
			a := s.Advisory(key)
			forms["advisory"] = func(k outcome.Kind) string { return a.Settle(k, sqltext.ByID()).SQL }
			if got := a.Settle(outcome.KindRetry, sqltext.ByIDs(3)); !got.Empty() {
				t.Errorf("%s: the advisory form's batch retry is %q, want no statement", dl.Name, got)
			}
		}
		for form, settle := range forms {
			if settle(outcome.KindDrop) != settle(outcome.KindAck) {
				t.Errorf("%s, %s form: Drop settles as %q, Ack as %q", dl.Name, form, settle(outcome.KindDrop), settle(outcome.KindAck))
			}
			if settle(outcome.KindNone) != settle(outcome.KindRetry) {
				t.Errorf("%s, %s form: the zero kind settles as %q, Retry as %q", dl.Name, form, settle(outcome.KindNone), settle(outcome.KindRetry))
			}
			if retry := settle(outcome.KindRetry); (retry == "") != (form == "advisory") {
				t.Errorf("%s, %s form: Retry settles as %q", dl.Name, form, retry)
			}
		}
	}
}

// TestGuardsAFormCannotTake: a guard that does not fit how a form holds its rows is refused
// rather than rendered into a statement that would settle rows the holder does not hold.
func TestGuardsAFormCannotTake(t *testing.T) {
	pg := dialect.Postgres[isolation.Default]{}
	s, lease, key := quoted(t, pg, golden.Shapes[0])
	my, myLease, _ := quoted(t, dialect.MySQL[isolation.Default]{}, golden.Shapes[0])
	lite, _, liteKey := quoted(t, dialect.SQLite[isolation.Default]{}, golden.Shapes[0])
	for name, build := range map[string]func(){
		"the row lock form by id and token":  func() { s.RowLock().Settle(outcome.KindAck, sqltext.ByIDAndToken()) },
		"the advisory form by pairs":         func() { s.Advisory(key).Settle(outcome.KindAck, sqltext.ByPairs(2)) },
		"the lease form by id alone":         func() { s.Lease(lease).Settle(outcome.KindAck, sqltext.ByID()) },
		"a lease extension by an id list":    func() { s.Lease(lease).Extend(sqltext.ByIDs(3)) },
		"pairs on MySQL, without RETURNING":  func() { my.Lease(myLease).Settle(outcome.KindAck, sqltext.ByPairs(2)) },
		"a batch returning its ids on MySQL": func() { my.Lease(myLease).SettleReturning(outcome.KindAck, 3) },
		"advisory statements on SQLite":      func() { lite.Advisory(liteKey) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: built, want a panic", name)
				}
			}()
			build()
		}()
	}
}

// FuzzNamesStayQuoted: whatever the table's, columns', lease column's and key's names, every
// statement the builders write has the shape it has for plain names and quotes nothing but
// those names: no name escapes its quotes.
func FuzzNamesStayQuoted(f *testing.F) {
	f.Add("jobs", "id", "payload", "attempt", "processed_at", "grp", "priority", "retry_after", "headers", "locked_until", "account")
	f.Add(`a"b`, "`id`", "?", "x y", "'", `""`, "a``b", "; DROP TABLE t; --", "$1", "ü", "{k}")
	f.Fuzz(func(t *testing.T, name, id, payload, attempt, processed, group, priority, retryAfter, headers, leaseCol, keyCol string) {
		as := func(fuzzed, plain string) string {
			if fuzzed == "" {
				return ""
			}
			return plain
		}
		fuzzed := golden.Shape{
			Table: sqltext.Table{Name: name, ID: id, IDGenerated: true, Payload: payload, Attempt: attempt, ProcessedAt: processed,
				Queue: group, Priority: priority, RetryAfter: retryAfter, Headers: headers},
			Lease: leaseCol,
			Key:   []sqltext.KeyPart{{Text: "k-"}, {Column: keyCol}},
		}
		plain := golden.Shape{
			Table: sqltext.Table{Name: "t", ID: "c0", IDGenerated: true, Payload: as(payload, "c1"), Attempt: as(attempt, "c2"),
				ProcessedAt: as(processed, "c3"), Queue: as(group, "c4"), Priority: as(priority, "c5"), RetryAfter: as(retryAfter, "c6"),
				Headers: as(headers, "c7")},
			Lease: "c8",
			Key:   []sqltext.KeyPart{{Text: "k-"}, {Column: "c9"}},
		}
		names := []string{name, id, payload, attempt, processed, group, priority, retryAfter, headers, leaseCol, keyCol}
		if slices.Contains(names[1:9], leaseCol) || keyCol == "" {
			return // descriptions the forms refuse, or keys that name no column
		}
		for _, dl := range golden.Dialects {
			if _, err := inbox.Table(fuzzed.Table).Quote(dl.D); err != nil {
				return
			}
			if _, err := dl.D.Quote(leaseCol); err != nil {
				return
			}
			if _, err := dl.D.Quote(keyCol); err != nil {
				return
			}
			got, want := all(t, dl.D, fuzzed), all(t, dl.D, plain)
			if len(got) != len(want) {
				t.Fatalf("%s: %d statements, %d with plain names", dl.Name, len(got), len(want))
			}
			for i := range got {
				shape, idents, literals, err := sqlshape.Split(got[i].SQL, dl.D.Caps().Quote)
				if err != nil {
					t.Fatalf("%s, %s: %v", dl.Name, got[i].Name, err)
				}
				wantShape, _, wantLiterals, _ := sqlshape.Split(want[i].SQL, dl.D.Caps().Quote)
				if shape != wantShape || !slices.Equal(literals, wantLiterals) {
					t.Fatalf("%s, %s has the shape\n%s\nwith literals %q; with plain names\n%s\nwith %q", dl.Name, got[i].Name, shape, literals, wantShape, wantLiterals)
				}
				for _, ident := range idents {
					if !slices.Contains(names, ident) {
						t.Fatalf("%s, %s quotes %q, none of the table's names: %s", dl.Name, got[i].Name, ident, got[i].SQL)
					}
				}
			}
		}
	})
}

// all is every statement of shape sh on d, of every form that runs there.
func all(t *testing.T, d dialect.Dialect, sh golden.Shape) []golden.Entry {
	c := d.Caps()
	s, lease, key := quoted(t, d, sh)
	out := append(leaseEntries(c, s.Lease(lease)), publishEntries(c, s, own(t, d, sh))...)
	out = append(out, wakeupEntries(s, d.Name())...)
	if c.SkipLocked {
		out = append(out, rowLockEntries(c, s.RowLock())...)
	}
	if c.Locks != dialect.NoSessionLocks {
		out = append(out, advisoryEntries(c, s.Advisory(key), sh.Table.DeadAt != "")...)
	}
	return out
}

// wakeupEntries are the consumer's statements of its wake-ups: when the queue's next delayed row
// falls due, and on SQLite the data version a DataVersionWaker reads.
func wakeupEntries(s sqltext.SQL, dialect string) []golden.Entry {
	var e entries
	e.add("next-due", s.NextDue())
	if dialect == "sqlite" {
		e.addText("data-version", sqltext.DataVersion)
	}
	return e
}

// rescheduleEntries are the statements of a reschedule by id (inbox.Client.Reschedule), over a
// table a lease form holds: its lock where the database has row locks, its change, and the
// read of a row it did not change.
func rescheduleEntries(c *dialect.Caps, r sqltext.Reschedule) []golden.Entry {
	var e entries
	if c.SkipLocked {
		e.add("lock", r.Lock())
	}
	e.add("change", r.Change())
	e.add("state", r.State())
	return e
}

// cancelEntries are the statements of a cancel by id (inbox.Cancel) over a table a lease form
// holds, and those of a consumer's cancel poll: the table of requests, the queued row's lock
// where the database has row locks and its stamp, the read of a row not stamped, the request of
// a row in work, the poll's read of the rows asked and of the requests, and what it writes of a request applied.
func cancelEntries(c *dialect.Caps, x sqltext.Cancels) []golden.Entry {
	var e entries
	e.addText("create", sqltext.CreateCancels(c))
	e.add("check", x.Check())
	if c.SkipLocked {
		e.add("lock", x.Lock())
	}
	e.add("stamp", x.Stamp())
	e.add("state", x.State())
	e.add("request", x.Request())
	e.add("asked(1)", x.Asked(1))
	e.add("asked(3)", x.Asked(3))
	e.add("requests", x.Requests())
	e.add("noted", x.Noted())
	e.add("forget", x.Forget())
	return e
}

// unclaimableEntries are the searches for rows no claim takes, and, where the table has a kind
// column, those for the rows of kinds a consumer of none or two kinds does not run.
func unclaimableEntries(s sqltext.SQL) []golden.Entry {
	u := s.Unclaimable(1001)
	var e entries
	e.add("null-queue", u.NullQueue())
	e.add("far-ahead", u.FarAhead())
	e.add("bad-layout", u.BadLayout())
	e.add("other-kinds(0)", s.OtherKinds(0))
	e.add("other-kinds(2)", s.OtherKinds(2))
	return e
}

// uniqueEntries are the statements of a publish whose unique key another row holds: the read of
// the holder, the replace and the throttle of a queued holder (after its pick where the database
// has row locks), and the expiry of a settled holder's key past the table's window.
func uniqueEntries(c *dialect.Caps, u sqltext.Unique) []golden.Entry {
	var e entries
	e.add("holder", u.Holder())
	if c.SkipLocked {
		e.add("pick-queued", u.PickQueued())
		e.add("pick-expired", u.PickExpired())
	}
	e.add("replace", u.Replace())
	e.add("throttle", u.Throttle())
	e.add("expire", u.Expire())
	return e
}
