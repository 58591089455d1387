package inboxotel_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/lease"
	inboxotel "github.com/sqlinbox/inbox/otel"
	"github.com/sqlinbox/inbox/outcome"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// recordedErrors are the messages of the exceptions recorded on span s.
func recordedErrors(s tracetest.SpanStub) []string {
	var msgs []string
	for _, e := range s.Events {
		if e.Name == "exception" {
			msgs = append(msgs, attr(e.Attributes, "exception.message").AsString())
		}
	}
	return msgs
}

// TestFailedDeliveriesAreErrors: a consumer's delivery whose handler returned an error, panicked
// or gave no outcome, or whose row died, ends its span with an error status and the error
// recorded; one acked, dropped without a reason or retried without one does not.
func TestFailedDeliveriesAreErrors(t *testing.T) {
	db := openSQLite(t)
	if _, err := db.Exec("ALTER TABLE jobs ADD COLUMN dead_at TEXT"); err != nil {
		t.Fatal(err)
	}
	tbl := jobs
	tbl.DeadAt = "dead_at"
	o := newObserved(t)
	var msgs []inbox.Message
	for _, p := range []string{"ack", "error", "permanent", "panic", "none", "drop", "retry", "dies"} {
		msgs = append(msgs, inbox.Message{Queue: "q", Payload: []byte(p)})
	}
	if err := inbox.Enqueue(context.Background(), db, sqliteD, tbl, msgs...); err != nil {
		t.Fatal(err)
	}
	// "dies" has had 24 deliveries: its retry, the 25th, is past the default attempt limit.
	if res, err := db.Exec("UPDATE jobs SET attempt = 24 WHERE CAST(payload AS TEXT) = 'dies'"); err != nil {
		t.Fatal(err)
	} else if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("%d rows set to attempt 24, want 1", n)
	}
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		switch string(d.Payload) {
		case "error":
			return inbox.Result(errors.New("the customer's server said 503"))
		case "permanent":
			return inbox.Result(inbox.Permanent(errors.New("no such customer")))
		case "panic":
			panic("the handler's bug")
		case "none":
			return outcome.Outcome{}
		case "drop":
			return outcome.Drop()
		case "retry":
			return outcome.Retry() // without a reason: the handler's choice, not a failure
		case "dies":
			return outcome.Retry().WithError(errors.New("still failing"))
		}
		return outcome.Ack()
	})
	c := inbox.NewConsumer(db, lease.New(sqliteD, tbl, nil), h, &inbox.Config{Queue: "q", Observer: o.obs, PollInterval: 20 * time.Millisecond})
	o.consume(t, c, len(msgs))

	type want struct {
		status codes.Code
		error  string // a fragment of the one error recorded; empty: none recorded
	}
	wants := map[string]want{
		"ack":       {codes.Unset, ""},
		"error":     {codes.Error, "the customer's server said 503"},
		"permanent": {codes.Error, "no such customer"},
		"panic":     {codes.Error, "handler panicked: the handler's bug"},
		"none":      {codes.Error, "no outcome"},
		"drop":      {codes.Unset, ""},
		"retry":     {codes.Unset, ""},
		"dies":      {codes.Error, "attempt 25 of 25: still failing"},
	}
	payloads := map[int64]string{}
	for i, m := range msgs {
		payloads[int64(i+1)] = string(m.Payload)
	}
	seen := 0
	for _, s := range o.spans.GetSpans() {
		p := payloads[attr(s.Attributes, inboxotel.AttrID).AsInt64()]
		w, ok := wants[p]
		if !ok {
			continue
		}
		seen++
		errs := recordedErrors(s)
		switch {
		case s.Status.Code != w.status:
			t.Errorf("%s (outcome %s): span status %v %q, want %v", p, attr(s.Attributes, inboxotel.AttrOutcome).AsString(), s.Status.Code, s.Status.Description, w.status)
		case w.error == "" && len(errs) > 0:
			t.Errorf("%s: errors recorded %q, want none", p, errs)
		case w.error != "" && (len(errs) != 1 || !strings.Contains(errs[0], w.error)):
			t.Errorf("%s: errors recorded %q, want one saying %q", p, errs, w.error)
		case w.error != "" && !strings.Contains(s.Status.Description, w.error):
			t.Errorf("%s: status description %q, want it to say %q", p, s.Status.Description, w.error)
		}
	}
	if seen != len(wants) {
		t.Errorf("%d delivery spans, want %d", seen, len(wants))
	}
}

// TestABatchWithFailedRowsIsAnError: a batch's span ends with an error status where any of its
// rows failed, each row's span as a delivery's would.
func TestABatchWithFailedRowsIsAnError(t *testing.T) {
	o := newObserved(t)
	ds := []*inbox.Delivery{{ID: 1, Attempt: 1}, {ID: 2, Attempt: 1}}
	u := inbox.Unit{Queue: "q", Form: "lease", Table: "jobs", Deliveries: ds, Claimed: time.Now()}
	ctx := o.obs.Handling(context.Background(), u)
	o.obs.Settled(ctx, inbox.Settlement{Queue: "q", Form: "lease", Table: "jobs", Deliveries: ds,
		Outcomes: []outcome.Outcome{outcome.Ack(), outcome.Fail(errors.New("no such customer"))}})
	status := map[int64]codes.Code{}
	batch := codes.Unset
	for _, s := range o.spans.GetSpans() {
		if id := attr(s.Attributes, inboxotel.AttrID); id.AsInt64() != 0 {
			status[id.AsInt64()] = s.Status.Code
		} else {
			batch = s.Status.Code
		}
	}
	if status[1] != codes.Unset || status[2] != codes.Error || batch != codes.Error {
		t.Errorf("status of rows %v and of the batch %v: want row 2's and the batch's an error", status, batch)
	}
}
