package lease

import (
	"reflect"
	"testing"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/internal/sqltext"
	"github.com/sqlinbox/inbox/internal/stmt"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
)

// TestGuardBindsWithoutSlices binds a row's extension and ack, and a batch's extension, by the
// statements' names through a hold's scratch (guard, rowArgs): the arguments come out in the
// order of the statement's parameters, and a run allocates its argument slice and nothing more
// (the values given here are boxed already, and a small id is boxed for free).
func TestGuardBindsWithoutSlices(t *testing.T) {
	d := dialect.Postgres[isolation.Default]{}
	st, err := stmt.New(d, inbox.Table{Name: "jobs", ID: "id", Payload: "payload", ProcessedAt: "processed_at", LockedUntil: "locked_until"})
	if err != nil {
		t.Fatal(err)
	}
	l := st.SQL().Lease(`"locked_until"`)
	one := sqltext.ByIDAndToken()
	ext, ack := l.Extend(one), l.Settle(outcome.KindAck, one)
	var next, held, now any = "next", "held", "now"

	h := &hold{}
	var got []any
	bindExt := func() {
		v := sqltext.Values{Lease: next}
		h.guard(&v, 7, held)
		got = ext.Bind(nil, &v)
	}
	if n := testing.AllocsPerRun(100, bindExt); n != 1 {
		t.Errorf("binding an extension allocates %v times, want 1 (the argument slice)", n)
	}
	if want := []any{"next", int64(7), "held"}; !reflect.DeepEqual(got, want) {
		t.Errorf("extension binds %v, want %v (statement: %s)", got, want, ext.SQL)
	}
	bindAck := func() {
		v := sqltext.Values{At: now}
		h.args.set(&v, 7, held)
		got = ack.Bind(nil, &v)
	}
	if n := testing.AllocsPerRun(100, bindAck); n != 1 {
		t.Errorf("binding an ack allocates %v times, want 1 (the argument slice)", n)
	}
	if want := []any{"now", int64(7), "held"}; !reflect.DeepEqual(got, want) {
		t.Errorf("ack binds %v, want %v (statement: %s)", got, want, ack.SQL)
	}

	// A batch of two claimed with room for three: its ids padded to three, then the token.
	batch := &hold{batch: []int64{7, 8}, size: 3}
	v := sqltext.Values{Lease: next}
	batch.guard(&v, 7, held)
	got = l.Extend(sqltext.ByIDsAndToken(3)).Bind(nil, &v)
	if want := []any{"next", int64(7), int64(8), int64(8), "held"}; !reflect.DeepEqual(got, want) {
		t.Errorf("a batch's extension binds %v, want %v", got, want)
	}
}
