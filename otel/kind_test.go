package inboxotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	inboxotel "github.com/sqlinbox/inbox/otel"
	"github.com/sqlinbox/inbox/outcome"
)

type mailJob struct{}

func (mailJob) Kind() string { return "mail" }

type printJob struct{}

func (printJob) Kind() string { return "print" }

// TestSpansAndCountersCarryTheKind runs two kinds of job, one of which fails, and checks the
// kind on each delivery's span and on inbox.settled, and no kind on a row of a table without
// a Kind column (TestSpansLinkToThePublisherAndCarryTheOutcome's rows, checked here too).
func TestSpansAndCountersCarryTheKind(t *testing.T) {
	db := openSQLite(t)
	if _, err := db.Exec("ALTER TABLE jobs ADD COLUMN kind TEXT"); err != nil {
		t.Fatal(err)
	}
	typed := jobs
	typed.Kind = "kind"
	if err := inbox.Enqueue(context.Background(), db, sqliteD, typed,
		inbox.Job(mailJob{}), inbox.Job(mailJob{}), inbox.Job(printJob{})); err != nil {
		t.Fatal(err)
	}
	o := newObserved(t)
	var kinds inbox.Kinds
	inbox.Handle(&kinds, func(context.Context, *inbox.Delivery, mailJob) error { return nil })
	inbox.Handle(&kinds, func(context.Context, *inbox.Delivery, printJob) error {
		return inbox.Permanent(errors.New("out of paper"))
	})
	c := inbox.NewConsumer(db, lease.New(sqliteD, typed, nil), &kinds, &inbox.Config{Observer: o.obs, PollInterval: 20 * time.Millisecond})
	o.consume(t, c, 3)

	byKind := map[string]int{}
	for _, s := range o.spans.GetSpans() {
		byKind[attr(s.Attributes, inboxotel.AttrKind).AsString()]++
	}
	if byKind["mail"] != 2 || byKind["print"] != 1 || len(byKind) != 2 {
		t.Errorf("spans by inbox.kind %v, want 2 mail and 1 print, none without a kind", byKind)
	}
	rm := o.collect(t)
	if got := sums(t, rm, "inbox.settled", inboxotel.AttrKind); got["mail"] != 2 || got["print"] != 1 || len(got) != 2 {
		t.Errorf("inbox.settled by inbox.kind %v, want 2 mail and 1 print", got)
	}
}

// TestNoKindWithoutAKindColumn: rows of a table without a Kind column carry no inbox.kind.
func TestNoKindWithoutAKindColumn(t *testing.T) {
	db := openSQLite(t)
	o := newObserved(t)
	publishTraced(t, db, o.tp, "a")
	h := inbox.HandlerFunc(func(context.Context, *inbox.Delivery) outcome.Outcome { return outcome.Ack() })
	c := inbox.NewConsumer(db, lease.New(sqliteD, jobs, nil), h, &inbox.Config{Queue: "q", Observer: o.obs, PollInterval: 20 * time.Millisecond})
	o.consume(t, c, 2)
	for _, s := range o.spans.GetSpans() {
		if v := attr(s.Attributes, inboxotel.AttrKind); v.Type() != 0 {
			t.Errorf("span %q has inbox.kind %q, want none", s.Name, v.AsString())
		}
	}
	if got := sums(t, o.collect(t), "inbox.settled", inboxotel.AttrKind); got[""] != 1 || len(got) != 1 {
		t.Errorf("inbox.settled by inbox.kind %v, want 1 row without the attribute", got)
	}
}
