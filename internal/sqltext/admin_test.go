package sqltext_test

import (
	"testing"

	"github.com/sqlinbox/inbox/dialect"

	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// adminShapes are the table descriptions the operating statements' golden files cover: every
// role with the lease column; dead rows kept with nothing else (no group, attempt, error,
// retry_after or lease); processed rows kept without a group; a publishing time without
// retry_after; every role with cancelled_at; and every role under odd names.
var adminShapes = []golden.Shape{
	{
		Name: "groups",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", RetryAfter: "retry_after", DeadAt: "dead_at", GroupKey: "group_key"},
		Lease: "locked_until",
	},
	{Name: "groups-no-queue", Table: sqltext.Table{Name: "jobs", ID: "id", DeadAt: "dead_at", GroupKey: "group_key"}},
	{
		Name: "all-roles",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
			DeadAt: "dead_at", LastError: "last_error", CreatedAt: "created_at"},
		Lease: "locked_until",
	},
	{Name: "dead-only", Table: sqltext.Table{Name: "jobs", ID: "id", DeadAt: "dead_at"}},
	{Name: "processed-no-group", Table: sqltext.Table{Name: "jobs", ID: "id", Attempt: "attempt", ProcessedAt: "processed_at", RetryAfter: "retry_after"}},
	{Name: "created-no-retry", Table: sqltext.Table{Name: "jobs", ID: "id", Queue: "queue", CreatedAt: "created_at"}},
	{Name: "kinds", Table: sqltext.Table{Name: "jobs", ID: "id", Queue: "queue", Kind: "kind", Attempt: "attempt", RetryAfter: "retry_after", DeadAt: "dead_at", CreatedAt: "created_at"}},
	{Name: "kinds-no-group", Table: sqltext.Table{Name: "jobs", ID: "id", Kind: "kind", RetryAfter: "retry_after"}},
	{
		Name: "cancelled",
		Table: sqltext.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt",
			ProcessedAt: "processed_at", Queue: "queue", Priority: "priority", RetryAfter: "retry_after", Headers: "headers",
			DeadAt: "dead_at", LastError: "last_error", CancelledAt: "cancelled_at", CreatedAt: "created_at"},
		Lease: "locked_until",
	},
	{
		Name: "odd-names",
		Table: sqltext.Table{Name: "select `from` \"where\"", ID: `id "x"`, IDGenerated: true, Attempt: "order",
			ProcessedAt: `processed "at"`, Queue: "group", RetryAfter: "retry after", DeadAt: "dead `at`", LastError: `"error"`},
		Lease: "locked `until` \"now\"",
	},
}

// adminGoldens checks (with -update, writes) the golden file of the operating statements of
// every shape on every database, and returns the files' paths.
func adminGoldens(t *testing.T) []string {
	var paths []string
	for _, dl := range golden.Dialects {
		for _, sh := range adminShapes {
			s, lease := adminQuoted(t, dl, sh)
			a := s.Admin(lease)
			var e entries
			stats, _ := a.Stats()
			e.addText("stats", stats)
			if sh.Table.DeadAt != "" {
				e.addText("dead", a.Dead(false, false))
				e.addText("dead(after)", a.Dead(false, true))
				if sh.Table.Queue != "" {
					e.addText("dead(queue, after)", a.Dead(true, true))
				}
				e.addText("pickDead", a.Pick(sqltext.DeadRows, false))
				if sh.Table.Queue != "" {
					e.addText("pickDead(queue)", a.Pick(sqltext.DeadRows, true))
				}
				e.addText("requeue(3)", a.Requeue(3))
				e.addText("purgeDead(3)", a.Purge(sqltext.DeadRows, 3))
			}
			if sh.Table.CancelledAt != "" {
				e.addText("pickCancelled(queue)", a.Pick(sqltext.CancelledRows, true))
				e.addText("requeueCancelled(3)", a.RequeueCancelled(3))
			}
			if sh.Table.ProcessedAt != "" {
				e.addText("pickProcessed", a.Pick(sqltext.ProcessedRows, false))
				if sh.Table.Queue != "" {
					e.addText("pickProcessed(queue)", a.Pick(sqltext.ProcessedRows, true))
				}
				e.addText("purgeProcessed(3)", a.Purge(sqltext.ProcessedRows, 3))
			}
			if sh.Table.GroupKey != "" {
				e.add("dead holder", a.DeadHolder())
				e.add("unblock group", a.UnblockGroup())
				e.add("pause group", a.PauseGroup())
				e.add("resume group", a.ResumeGroup())
			}
			for _, b := range pageStatements(dl.D.Caps(), a, sh.Table, lease != "") {
				e.addText(b.name, b.SQL)
			}
			golden.Pin(t, "admin", dl.Name, sh.Name, e)
			paths = append(paths, golden.Path("admin", dl.Name, sh.Name))
		}
	}
	return paths
}

func TestAdminStatsBindsNowOncePerParameter(t *testing.T) {
	for _, dl := range golden.Dialects {
		for _, sh := range adminShapes {
			s, lease := adminQuoted(t, dl, sh)
			query, nows := s.Admin(lease).Stats()
			if got := countParams(query); got != nows {
				t.Errorf("%s, %s: the statement has %d parameters, Stats says %d: %s", dl.Name, sh.Name, got, nows, query)
			}
		}
	}
}

// countParams counts the parameters of a statement whose names hold no ? nor $.
func countParams(query string) int {
	n := 0
	for i := 0; i < len(query); i++ {
		if query[i] == '?' || query[i] == '$' {
			n++
		}
	}
	return n
}

// adminQuoted is shape sh on dl: its statements' builder and its lease column ("" for none),
// every name quoted.
func adminQuoted(t *testing.T, dl golden.Dialect, sh golden.Shape) (sqltext.SQL, string) {
	t.Helper()
	lease := sh.Lease
	if lease == "" {
		sh.Lease = "unused"
	}
	s, quotedLease, _ := quoted(t, dl.D, sh)
	if lease == "" {
		quotedLease = ""
	}
	return s, quotedLease
}

// named is a statement of the operator's page, by the name its golden entry takes.
type named struct {
	name string
	sqltext.Bound
}

// pageStatements are the statements of the operator's page (listings, counts, picks, a row,
// and the changes over ids) that table tb, with or without a lease column, has the roles for.
func pageStatements(c *dialect.Caps, a sqltext.Admin, tb sqltext.Table, lease bool) []named {
	var out []named
	add := func(name string, b sqltext.Bound) { out = append(out, named{name, b}) }
	add("bounds", sqltext.Bound{SQL: a.Bounds()})
	if tb.GroupKey != "" {
		add("groups", a.Groups())
		if tb.Queue != "" {
			add("groups(a queue)", a.QueueGroups())
		}
	}
	add("row", sqltext.Bound{SQL: a.Row(), Binds: []sqltext.Bind{sqltext.BindID}})
	add("rows", a.Rows(sqltext.Filter{From: true, To: true}, 120))
	add("rows(due)", a.Rows(sqltext.Filter{State: sqltext.Due, To: true}, 120))
	if tb.Queue != "" {
		add("rows(due, 2 queues)", a.Rows(sqltext.Filter{State: sqltext.Due, Queues: 2, From: true, To: true}, 120))
	}
	if tb.Kind != "" {
		add("rows(any, a queue, 2 kinds)", a.Rows(sqltext.Filter{Queues: min(len(tb.Queue), 1), Kinds: 2, To: true}, 120))
		add("count(dead, 2 kinds, delete)", a.Count(sqltext.Filter{State: sqltext.Dead, Kinds: 2, Act: sqltext.DeleteAct}))
	}
	if tb.CreatedAt != "" {
		add("rows(due, older)", a.Rows(sqltext.Filter{State: sqltext.Due, Before: true, To: true}, 120))
	}
	if tb.RetryAfter != "" {
		add("rows(delayed)", a.Rows(sqltext.Filter{State: sqltext.Delayed, To: true}, 120))
		add("count(delayed, retry now)", a.Count(sqltext.Filter{State: sqltext.Delayed, Act: sqltext.RetryNowAct}))
	}
	if lease {
		add("rows(in work)", a.Rows(sqltext.Filter{State: sqltext.InWork, To: true}, 120))
	}
	if tb.Attempt != "" {
		add("rows(retrying)", a.Rows(sqltext.Filter{State: sqltext.Retrying, To: true}, 120))
	}
	if tb.DeadAt != "" {
		dead := sqltext.Filter{State: sqltext.Dead, From: true, To: true, Before: true, Error: tb.LastError != ""}
		add("rows(dead, older, error)", a.Rows(dead, 120))
		add("count(dead)", a.Count(dead))
		dead.Act = sqltext.RequeueAct
		add("pickMatching(dead, requeue)", a.PickMatching(dead))
	}
	if tb.ProcessedAt != "" {
		add("rows(processed, older)", a.Rows(sqltext.Filter{State: sqltext.Processed, Before: true, To: true}, 120))
		add("pickMatching(processed, delete)", a.PickMatching(sqltext.Filter{State: sqltext.Processed, Before: true, Act: sqltext.DeleteAct}))
	}
	if tb.Payload != "" {
		sources := []sqltext.JSONSource{sqltext.PayloadBytes}
		if c.Catalog == dialect.PostgresCatalog {
			sources = append(sources, sqltext.PayloadText, sqltext.PayloadJSON)
		}
		names := map[sqltext.JSONSource]string{sqltext.PayloadBytes: "bytes", sqltext.PayloadText: "text", sqltext.PayloadJSON: "json"}
		for _, src := range sources {
			add("rows(payload as "+names[src]+")", a.Rows(sqltext.Filter{From: true, To: true, Payload: src}, 120))
		}
	}
	if tb.CancelledAt != "" {
		add("count(retrying, cancel)", a.Count(sqltext.Filter{State: sqltext.Retrying, Act: sqltext.CancelAct}))
		add("pickMatching(any, a queue, cancel)", a.PickMatching(sqltext.Filter{Queues: 1, Act: sqltext.CancelAct}))
		add("eligible(cancel, 3)", a.Eligible(sqltext.CancelAct, 3))
	}
	acts := []struct {
		name string
		act  sqltext.Act
		has  bool
	}{{"requeue", sqltext.RequeueAct, tb.DeadAt != ""}, {"retryNow", sqltext.RetryNowAct, tb.RetryAfter != ""}, {"delete", sqltext.DeleteAct, true}}
	for _, act := range acts {
		if !act.has {
			continue
		}
		add("eligible("+act.name+", 3)", a.Eligible(act.act, 3))
		if c.SkipLocked {
			add("lock("+act.name+", 3)", a.Lock(act.act, 3))
		}
		add("change("+act.name+", 3)", a.Change(act.act, 3))
		add("change("+act.name+", 1)", a.Change(act.act, 1))
	}
	return out
}

// TestPageStatementsBindWhatTheySay: each statement of the page binds as many values as it
// has parameters.
func TestPageStatementsBindWhatTheySay(t *testing.T) {
	for _, dl := range golden.Dialects {
		for _, sh := range adminShapes {
			s, lease := adminQuoted(t, dl, sh)
			for _, b := range pageStatements(dl.D.Caps(), s.Admin(lease), sh.Table, lease != "") {
				if got := countParams(b.SQL); got != len(b.Binds) {
					t.Errorf("%s, %s, %s: %d parameters, %d binds %v: %s", dl.Name, sh.Name, b.name, got, len(b.Binds), b.Binds, b.SQL)
				}
			}
		}
	}
}
