package sqltext_test

import (
	"testing"

	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/sqltext/golden"
)

// adminShapes are the table descriptions the operating statements' golden files cover: every
// role with the lease column; dead rows kept with nothing else (no group, attempt, error,
// retry_after or lease); processed rows kept without a group; a publishing time without
// retry_after; and every role under odd names.
var adminShapes = []golden.Shape{
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
			e.add("stats", stats)
			if sh.Table.DeadAt != "" {
				e.add("dead", a.Dead(false, false))
				e.add("dead(after)", a.Dead(false, true))
				if sh.Table.Queue != "" {
					e.add("dead(queue, after)", a.Dead(true, true))
				}
				e.add("pickDead", a.Pick(sqltext.DeadRows, false))
				if sh.Table.Queue != "" {
					e.add("pickDead(queue)", a.Pick(sqltext.DeadRows, true))
				}
				e.add("requeue(3)", a.Requeue(3))
				e.add("purgeDead(3)", a.Purge(sqltext.DeadRows, 3))
			}
			if sh.Table.ProcessedAt != "" {
				e.add("pickProcessed", a.Pick(sqltext.ProcessedRows, false))
				if sh.Table.Queue != "" {
					e.add("pickProcessed(queue)", a.Pick(sqltext.ProcessedRows, true))
				}
				e.add("purgeProcessed(3)", a.Purge(sqltext.ProcessedRows, 3))
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
