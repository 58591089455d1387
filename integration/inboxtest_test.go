package integration

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// TestInboxtest: on every form × database, inboxtest.Enqueued reads back what was published,
// and inboxtest.Drain runs a consumer until no row is due, then says what it settled.
func TestInboxtest(t *testing.T) {
	forEachCell(t, func(t *testing.T, c cell) {
		ctx := context.Background()
		db, tbl := c.b.openTable(t, 8, fullTable)
		published := []inbox.Message{
			{Queue: "q", Payload: []byte("ack"), Priority: 2, Headers: map[string]string{"traceparent": "00-1-2-01"}},
			{Queue: "q", Payload: []byte("retry"), Priority: 1},
			{Queue: "other", Payload: []byte("not ours")},
			{Queue: "q", Payload: []byte("ack")},
		}
		c.publish(t, db, tbl, published...)
		got, err := inboxtest.Enqueued(ctx, db, c.b.dialect, tbl, "q")
		if err != nil {
			t.Fatal(err)
		}
		want := []inbox.Message{published[0], published[1], published[3]}
		if len(got) != len(want) {
			t.Fatalf("Enqueued read %d messages of queue q, want %d: %+v", len(got), len(want), got)
		}
		for i, m := range got {
			w := want[i]
			if m.ID == 0 || m.Queue != w.Queue || string(m.Payload) != string(w.Payload) || m.Priority != w.Priority || !maps.Equal(m.Headers, w.Headers) {
				t.Errorf("message %d read back as %+v, published as %+v", i, m, w)
			}
		}

		h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
			if string(d.Payload) == "retry" && d.Attempt == 1 {
				return outcome.Retry()
			}
			return outcome.Ack()
		})
		drained, err := inboxtest.Drain(ctx, time.Minute, func(obs inbox.Observer) *inbox.Consumer {
			return inbox.NewConsumer(db, c.newForm(t, tbl), h, &inbox.Config{Queue: "q", Workers: 2, Observer: obs, PollInterval: cellPoll, Logger: testLogger(t), Retry: inbox.RetryAtOnce})
		})
		if err != nil {
			t.Fatal(err)
		}
		// The Retry is settled as the retry policy's RetryAfter, at once (RetryAtOnce).
		if drained.Settled[outcome.KindAck] != 3 || drained.Settled[outcome.KindRetryAfter] != 1 || drained.Failed != 0 {
			t.Errorf("drained %+v, want 3 acks and 1 retry after", drained)
		}
		if left, err := inboxtest.Enqueued(ctx, db, c.b.dialect, tbl, "q"); err != nil || len(left) != 0 {
			t.Errorf("after Drain, queue q holds %+v (%v), want nothing", left, err)
		}
	})
}
