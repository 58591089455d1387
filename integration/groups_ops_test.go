package integration

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/lease"
	"github.com/sqlinbox/inbox/outcome"
)

// The operator's side of FIFO groups: a dead head that keeps its group blocked and the unblock
// that lets it go on, claims spread across groups, and paused groups.

// groupsOf is the group of each of ds, in order.
func groupsOf(ds []*inbox.Delivery) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = groupOf(d)
	}
	return out
}

// groupAdmin is the operator of tbl on db, failing the test on an error.
func groupAdmin(t *testing.T, b backend, db *sql.DB, tbl inbox.Table) *admin.Admin {
	t.Helper()
	a, err := admin.New(db, b.dialect, tbl)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// groupListed is group key of a's listing, failing the test where it is not listed.
func groupListed(t *testing.T, a *admin.Admin, key string) admin.Group {
	t.Helper()
	groups, err := a.Groups(context.Background(), 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range groups {
		if g.Key == key {
			return g
		}
	}
	t.Fatalf("group %s is not listed: %+v", key, groups)
	return admin.Group{}
}

// TestGroupsDeadHeadStaysBlocked: with lease.Config.GroupsStayBlocked, the head of group a dies
// in work and a claim then takes the rows of group b but nothing of a (without the option it
// takes a's next row: the test fails); admin.Groups lists a as blocked by its dead head;
// UnblockGroup steps past it, a's next row is claimed, and the dead head stays dead. A second
// unblock changes nothing. On every database.
func TestGroupsDeadHeadStaysBlocked(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := b.newGroupTable(t, db)
		ids, err := inbox.EnqueueIDs(ctx, db, b.dialect, tbl,
			inbox.Message{Queue: "q", GroupKey: "a", Payload: []byte("a/0")},
			inbox.Message{Queue: "q", GroupKey: "b", Payload: []byte("b/0")},
			inbox.Message{Queue: "q", GroupKey: "a", Payload: []byte("a/1")},
			inbox.Message{Queue: "q", GroupKey: "b", Payload: []byte("b/1")})
		if err != nil {
			t.Fatal(err)
		}
		f := openForm(t, lease.New(b.dialect, tbl, &lease.Config{GroupsStayBlocked: true}), db, inbox.Binding{Name: "q"})
		heads := claim(t, f, 10)
		if got := deliveryIDs(heads); !slices.Equal(got, []int64{ids[0], ids[1]}) {
			t.Fatalf("claimed %v, want the heads %d and %d", got, ids[0], ids[1])
		}
		settle(t, f, heads[0], outcome.Fail(errors.New("permanent")))
		settle(t, f, heads[1], outcome.Ack())
		if got := deliveryIDs(claim(t, f, 10)); !slices.Equal(got, []int64{ids[3]}) {
			t.Fatalf("after a's head died, claimed %v, want b's next row %d alone: a dead head lets its group go on", got, ids[3])
		}
		a := groupAdmin(t, b, db, tbl)
		if g := groupListed(t, a, "a"); g.DeadHead != ids[0] || g.Head != ids[2] || !g.Blocked(time.Now()) {
			t.Errorf("group a: %+v (blocked %v), want its dead head %d, its head %d, blocked", g, g.Blocked(time.Now()), ids[0], ids[2])
		}
		stepped, err := a.UnblockGroup(ctx, "q", "a")
		if err != nil || stepped != ids[0] {
			t.Fatalf("UnblockGroup: %d, %v; want the dead head %d", stepped, err, ids[0])
		}
		if got := deliveryIDs(claim(t, f, 10)); !slices.Equal(got, []int64{ids[2]}) {
			t.Errorf("after the unblock, claimed %v, want a's next row %d", got, ids[2])
		}
		if dead := column[int64](t, db, "SELECT COUNT(*) FROM "+b.q(t, tbl.Name)+" WHERE "+b.q(t, tbl.ID)+" = "+b.placeholders(1)+" AND "+b.q(t, tbl.DeadAt)+" IS NOT NULL", ids[0]); dead[0] != 1 {
			t.Errorf("the dead head %d is no longer dead after the unblock", ids[0])
		}
		if again, err := a.UnblockGroup(ctx, "q", "a"); err != nil || again != 0 {
			t.Errorf("a second UnblockGroup: %d, %v; want 0, nil", again, err)
		}
	})
}

// TestGroupsDeadHeadLetsTheGroupGoOn: without the option, a claim after a's head died takes a's
// next row (the default the docs state), beside b's.
func TestGroupsDeadHeadLetsTheGroupGoOn(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		ctx := context.Background()
		db := b.open(t, 4)
		tbl := b.newGroupTable(t, db)
		ids, err := inbox.EnqueueIDs(ctx, db, b.dialect, tbl,
			inbox.Message{Queue: "q", GroupKey: "a", Payload: []byte("a/0")},
			inbox.Message{Queue: "q", GroupKey: "a", Payload: []byte("a/1")})
		if err != nil {
			t.Fatal(err)
		}
		f := openForm(t, lease.New(b.dialect, tbl, nil), db, inbox.Binding{Name: "q"})
		settle(t, f, claim(t, f, 10)[0], outcome.Fail(errors.New("permanent")))
		if got := deliveryIDs(claim(t, f, 10)); !slices.Equal(got, []int64{ids[1]}) {
			t.Errorf("after a's head died, claimed %v, want a's next row %d", got, ids[1])
		}
	})
}

// TestGroupsStayBlockedNeedsDeadAt: GroupsStayBlocked on a table without a dead_at column, where
// a dying row is dropped, is refused at Open with ErrSchema naming the option and the column.
func TestGroupsStayBlockedNeedsDeadAt(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl := b.newGroupTable(t, db)
		tbl.DeadAt = ""
		_, err := lease.New(b.dialect, tbl, &lease.Config{GroupsStayBlocked: true}).Open(context.Background(), db, inbox.Binding{Name: "q"})
		if !errors.Is(err, inbox.ErrSchema) || !strings.Contains(err.Error(), "GroupsStayBlocked") || !strings.Contains(err.Error(), "DeadAt") {
			t.Errorf("Open: %v, want ErrSchema naming GroupsStayBlocked and DeadAt", err)
		}
	})
}

// TestGroupsRoundRobin: group a's five rows have lower ids than group b's five. With
// lease.Config.GroupsRoundRobin, claims of one row each alternate a, b, a, b…; without it, a
// drains before b starts. On every database.
func TestGroupsRoundRobin(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		tbl := b.newGroupTable(t, db)
		var msgs []inbox.Message
		for _, g := range []string{"a", "b"} {
			for i := range 5 {
				msgs = append(msgs, inbox.Message{Queue: "q", GroupKey: g, Payload: []byte(g + "/" + string(rune('0'+i)))})
			}
		}
		drain := func(cfg *lease.Config) []string {
			b.enqueue(t, db, tbl, msgs...)
			f := lease.New(b.dialect, tbl, cfg)
			if _, err := f.Open(context.Background(), db, inbox.Binding{Name: "q"}); err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			var order []string
			for {
				ds := claim(t, f, 1)
				if len(ds) == 0 {
					return order
				}
				order = append(order, groupsOf(ds)...)
				settle(t, f, ds[0], outcome.Ack())
			}
		}
		if got, want := drain(&lease.Config{GroupsRoundRobin: true}), []string{"a", "b", "a", "b", "a", "b", "a", "b", "a", "b"}; !slices.Equal(got, want) {
			t.Errorf("round robin: the groups started in the order %v, want %v", got, want)
		}
		if got, want := drain(nil), []string{"a", "a", "a", "a", "a", "b", "b", "b", "b", "b"}; !slices.Equal(got, want) {
			t.Errorf("the usual order: the groups started in the order %v, want %v", got, want)
		}
	})
}

// TestGroupsPaused: PauseGroup of a group whose head is in work lets that row settle, and from
// then no claim takes the group's rows, nor those of a group paused before any claim held it,
// while other groups run (decided before the LIMIT: a claim of one row takes b's); admin.Groups shows the pause; ResumeGroup gives both back to the
// claims. On every database.
func TestGroupsPaused(t *testing.T) {
	forEachBackend(t, backends(t, true), func(t *testing.T, b backend) {
		db := b.open(t, 4)
		groupsPaused(t, spread{b: b, admin: db, pools: []*sql.DB{db}})
	})
}

// groupsPaused is TestGroupsPaused's scenario on s: the groups are published, paused, listed
// and resumed on s's admin pool, and claimed and settled by a form on s's last pool (on a
// cluster, another node than the admin's).
func groupsPaused(t *testing.T, s spread) {
	b := s.b
	ctx := context.Background()
	db := s.admin
	tbl := b.newGroupTable(t, db)
	ids, err := inbox.EnqueueIDs(ctx, db, b.dialect, tbl,
		inbox.Message{Queue: "q", GroupKey: "a", Payload: []byte("a/0")},
		inbox.Message{Queue: "q", GroupKey: "a", Payload: []byte("a/1")},
		inbox.Message{Queue: "q", GroupKey: "b", Payload: []byte("b/0")},
		inbox.Message{Queue: "q", GroupKey: "c", Payload: []byte("c/0")})
	if err != nil {
		t.Fatal(err)
	}
	s.ready(t, tbl.Name)
	f := openForm(t, lease.New(b.dialect, tbl, nil), s.pools[len(s.pools)-1], inbox.Binding{Name: "q", UnpreparedStatements: s.unprepared})
	inWork := claim(t, f, 1)
	if got := deliveryIDs(inWork); !slices.Equal(got, []int64{ids[0]}) {
		t.Fatalf("claimed %v, want a's head %d", got, ids[0])
	}
	a := groupAdmin(t, b, db, tbl)
	for _, g := range []string{"a", "c", "c"} { // c twice: pausing a paused group changes nothing
		if err := a.PauseGroup(ctx, "q", g); err != nil {
			t.Fatalf("PauseGroup %s: %v", g, err)
		}
	}
	settle(t, f, inWork[0], outcome.Ack())
	// A claim of one row: a's head comes first in claim order, so a pause decided after the
	// LIMIT would leave this claim empty. (On a Galera node the settlement's commit came after
	// the pauses' in the cluster's order, so the node has applied them.)
	if got := deliveryIDs(claim(t, f, 1)); !slices.Equal(got, []int64{ids[2]}) {
		t.Fatalf("with a and c paused, claimed %v, want b's row %d alone", got, ids[2])
	}
	if g := groupListed(t, a, "a"); g.PausedSince.IsZero() || time.Since(g.PausedSince).Abs() > time.Minute {
		t.Errorf("group a: paused since %v, want about now", g.PausedSince)
	}
	if g := groupListed(t, a, "b"); !g.PausedSince.IsZero() {
		t.Errorf("group b: paused since %v, want not paused", g.PausedSince)
	}
	for _, g := range []string{"a", "c"} {
		if err := a.ResumeGroup(ctx, "q", g); err != nil {
			t.Fatalf("ResumeGroup %s: %v", g, err)
		}
	}
	// A Galera node claims by what it has applied, a moment after the resume's commit: claims
	// are tried again for a while, and must take both rows once and nothing else.
	var resumed []*inbox.Delivery
	waitFor(t, 10*time.Second, "the resumed groups claimed", func() bool {
		resumed = append(resumed, claim(t, f, 10)...)
		return len(resumed) >= 2
	})
	if got := sortedIDs(resumed); !slices.Equal(got, []int64{ids[1], ids[3]}) {
		t.Errorf("after the resumes, claimed %v, want a's next row %d and c's %d", got, ids[1], ids[3])
	}
	if err := a.PauseGroup(ctx, "q", ""); err == nil {
		t.Errorf("PauseGroup of the empty group: no error, want one (a row of no key is of no group)")
	}
}
