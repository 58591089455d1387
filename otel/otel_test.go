package inboxotel_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	_ "github.com/glebarez/go-sqlite"
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	inboxotel "github.com/sqlinbox/inbox/otel"
	"github.com/sqlinbox/inbox/outcome"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

var (
	sqliteD = dialect.SQLite[isolation.Immediate]{}
	jobs    = inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", Queue: "grp", Headers: "headers", RetryAfter: "retry_after"}
)

// openSQLite opens a SQLite file of the test's with the jobs table in it.
func openSQLite(t *testing.T) *sql.DB {
	t.Helper()
	dsn := "file:" + filepath.Join(t.TempDir(), "jobs.db") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(4)
	_, err = db.Exec("CREATE TABLE jobs (id INTEGER PRIMARY KEY, payload BLOB, attempt INT NOT NULL DEFAULT 0, grp TEXT NOT NULL DEFAULT '', headers TEXT, retry_after TEXT, locked_until TEXT)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// observed is an observer of the test's, over a tracer provider that records the spans it ends
// and a meter provider read by hand.
type observed struct {
	obs    *inboxotel.Observer
	spans  *tracetest.InMemoryExporter
	tp     *sdktrace.TracerProvider
	reader *sdkmetric.ManualReader
}

func newObserved(t *testing.T) observed {
	t.Helper()
	o := observed{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(o.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	var err error
	if o.obs, err = inboxotel.NewObserver(&inboxotel.Config{TracerProvider: o.tp, MeterProvider: mp}); err != nil {
		t.Fatal(err)
	}
	return o
}

// collect reads the metrics the meter provider holds now.
func (o observed) collect(t *testing.T) metricdata.ResourceMetrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	return rm
}

// publishTraced publishes a row of queue q for each payload inside a span "publish", which it
// returns ended.
func publishTraced(t *testing.T, db *sql.DB, tp trace.TracerProvider, payloads ...string) trace.Span {
	t.Helper()
	ctx, publish := tp.Tracer("test").Start(context.Background(), "publish")
	defer publish.End()
	var msgs []inbox.Message
	for _, p := range payloads {
		m := inbox.Message{Queue: "q", Payload: []byte(p)}
		inboxotel.Inject(ctx, &m)
		msgs = append(msgs, m)
	}
	if err := inbox.Enqueue(ctx, db, sqliteD, jobs, msgs...); err != nil {
		t.Fatal(err)
	}
	return publish
}

// consume runs c until o has recorded n spans, then stops it.
func (o observed) consume(t *testing.T, c *inbox.Consumer, n int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	deadline := time.Now().Add(20 * time.Second)
	for len(o.spans.GetSpans()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d spans after 20 s, want %d", len(o.spans.GetSpans()), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}

// TestSpansLinkToThePublisherAndCarryTheOutcome publishes three rows from inside a span, one
// of which the handler retries once, and checks a span per delivery, each linked to the
// publisher's span, parent of the handler's own span, and the counters and histogram.
func TestSpansLinkToThePublisherAndCarryTheOutcome(t *testing.T) {
	db := openSQLite(t)
	o := newObserved(t)
	publish := publishTraced(t, db, o.tp, "ack", "retry", "drop")
	h := inbox.HandlerFunc(func(ctx context.Context, d *inbox.Delivery) outcome.Outcome {
		_, child := o.tp.Tracer("test").Start(ctx, "handler work")
		child.End()
		switch {
		case string(d.Payload) == "retry" && d.Attempt == 1:
			return outcome.Retry()
		case string(d.Payload) == "drop":
			return outcome.Drop()
		}
		return outcome.Ack()
	})
	c := inbox.NewConsumer(db, lease.New(sqliteD, jobs, nil), h, &inbox.Config{Queue: "q", Observer: o.obs, PollInterval: 20 * time.Millisecond})
	// publish, four deliveries and four handler spans
	o.consume(t, c, 9)

	got := o.spans.GetSpans()
	var deliveries []tracetest.SpanStub
	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range got {
		byID[s.SpanContext.SpanID()] = s
		if s.Name == "process q" {
			deliveries = append(deliveries, s)
		}
	}
	if len(deliveries) != 4 {
		t.Fatalf("%d delivery spans, want 4 (three rows, one retried)", len(deliveries))
	}
	outcomes := map[string]int{}
	for _, s := range deliveries {
		if s.SpanKind != trace.SpanKindConsumer || len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != publish.SpanContext().SpanID() {
			t.Errorf("span %v: kind %v, links %v; want a consumer span linked to the publisher's", s.SpanContext.SpanID(), s.SpanKind, s.Links)
		}
		outcomes[attr(s.Attributes, inboxotel.AttrOutcome).AsString()]++
		if f := attr(s.Attributes, inboxotel.AttrForm).AsString(); f != "lease" {
			t.Errorf("span of form %q, want lease", f)
		}
	}
	// The handler's Retry is settled as the retry policy's RetryAfter.
	if outcomes["ack"] != 2 || outcomes["retry_after"] != 1 || outcomes["drop"] != 1 {
		t.Errorf("outcomes on spans %v, want 2 ack, 1 retry_after, 1 drop", outcomes)
	}
	for _, s := range got {
		if s.Name == "handler work" {
			if parent, ok := byID[s.Parent.SpanID()]; !ok || parent.Name != "process q" {
				t.Errorf("the handler's span has parent %v, want its delivery's span", s.Parent.SpanID())
			}
		}
	}

	rm := o.collect(t)
	settled := sums(t, rm, "inbox.settled", inboxotel.AttrOutcome)
	if settled["ack"] != 2 || settled["retry_after"] != 1 || settled["drop"] != 1 {
		t.Errorf("inbox.settled %v, want 2 ack, 1 retry_after, 1 drop", settled)
	}
	if n := histogramCount(t, rm, "inbox.handler.duration"); n != 4 {
		t.Errorf("inbox.handler.duration counted %d handler calls, want 4", n)
	}
}

// TestBatchSpansAreChildrenOfTheBatchsSpan: a batch handler's context carries the batch's span,
// and each delivery has a span of its own under it, linked to its publisher.
func TestBatchSpansAreChildrenOfTheBatchsSpan(t *testing.T) {
	db := openSQLite(t)
	o := newObserved(t)
	publish := publishTraced(t, db, o.tp, "x", "x", "x")
	var handlerSpan trace.SpanID
	h := inbox.BatchHandlerFunc(func(ctx context.Context, ds []*inbox.Delivery) []outcome.Outcome {
		handlerSpan = trace.SpanFromContext(ctx).SpanContext().SpanID()
		outs := make([]outcome.Outcome, len(ds))
		for i := range outs {
			outs[i] = outcome.Ack()
		}
		return outs
	})
	c := inbox.NewBatchConsumer(db, lease.New(sqliteD, jobs, nil), 8, h, &inbox.Config{Queue: "q", Observer: o.obs, PollInterval: 20 * time.Millisecond})
	o.consume(t, c, 5) // publish, the batch, three deliveries

	var batch tracetest.SpanStub
	var rows []tracetest.SpanStub
	for _, s := range o.spans.GetSpans() {
		switch {
		case s.Name != "process q":
		case attr(s.Attributes, "messaging.batch.message_count").AsInt64() == 3:
			batch = s
		default:
			rows = append(rows, s)
		}
	}
	if batch.SpanContext.SpanID() != handlerSpan || len(batch.Links) != 3 {
		t.Fatalf("batch span %v with %d links, handler's span %v; want the handler's, linked to 3 publishes", batch.SpanContext.SpanID(), len(batch.Links), handlerSpan)
	}
	if len(rows) != 3 {
		t.Fatalf("%d delivery spans, want 3", len(rows))
	}
	for _, s := range rows {
		if s.Parent.SpanID() != handlerSpan || len(s.Links) != 1 || s.Links[0].SpanContext.TraceID() != publish.SpanContext().TraceID() {
			t.Errorf("delivery span: parent %v, links %v; want the batch's child, linked to the publisher", s.Parent.SpanID(), s.Links)
		}
	}
}

// TestFailedSettlementsAreErrors: a settlement that fails (the form closed under it) marks its
// span as an error and counts its row with error.type.
func TestFailedSettlementsAreErrors(t *testing.T) {
	o := newObserved(t)
	d := &inbox.Delivery{ID: 7, Attempt: 1}
	u := inbox.Unit{Queue: "q", Form: "lease", Table: "jobs", Deliveries: []*inbox.Delivery{d}, Claimed: time.Now()}
	ctx := o.obs.Handling(context.Background(), u)
	o.obs.Settled(ctx, inbox.Settlement{Queue: "q", Form: "lease", Table: "jobs", Deliveries: u.Deliveries,
		Outcomes: []outcome.Outcome{outcome.Ack()}, Err: fmt.Errorf("%w: the test says so", inbox.ErrLeaseLost)})
	got := o.spans.GetSpans()
	if len(got) != 1 || got[0].Status.Code != codes.Error {
		t.Fatalf("spans %v, want one with an error status", got)
	}
	rm := o.collect(t)
	if failed := sums(t, rm, "inbox.settled", inboxotel.AttrError); failed["lease_lost"] != 1 {
		t.Errorf("inbox.settled by error.type %v, want one lease_lost", failed)
	}
}

// TestALeaseBatchFailsOnlyTheRowsItLost: a lease batch's *inbox.LeaseLostError names the rows
// left unchanged; the others settled, and are counted and traced so.
func TestALeaseBatchFailsOnlyTheRowsItLost(t *testing.T) {
	o := newObserved(t)
	ds := []*inbox.Delivery{{ID: 1, Attempt: 1}, {ID: 2, Attempt: 1}}
	u := inbox.Unit{Queue: "q", Form: "lease", Table: "jobs", Deliveries: ds, Claimed: time.Now()}
	ctx := o.obs.Handling(context.Background(), u)
	o.obs.Settled(ctx, inbox.Settlement{Queue: "q", Form: "lease", Table: "jobs", Deliveries: ds,
		Outcomes: []outcome.Outcome{outcome.Ack(), outcome.Ack()}, Err: &inbox.LeaseLostError{Table: "jobs", IDs: []int64{2}}})
	failedSpans := map[int64]bool{}
	for _, s := range o.spans.GetSpans() {
		if id := attr(s.Attributes, inboxotel.AttrID); id.Type() != attribute.INVALID {
			failedSpans[id.AsInt64()] = s.Status.Code == codes.Error
		}
	}
	if len(failedSpans) != 2 || failedSpans[1] || !failedSpans[2] {
		t.Errorf("error status by row %v, want row 2's span only", failedSpans)
	}
	rm := o.collect(t)
	if byError := sums(t, rm, "inbox.settled", inboxotel.AttrError); byError["lease_lost"] != 1 || byError[""] != 1 {
		t.Errorf("inbox.settled by error.type %v, want one lease_lost and one settled", byError)
	}
}

// TestWatchQueueReadsTheStatsAtEachCollection: the gauges report what the stats function
// returns when the reader collects.
func TestWatchQueueReadsTheStatsAtEachCollection(t *testing.T) {
	o := newObserved(t)
	depth := int64(5)
	reg, err := o.obs.WatchQueue("q", "jobs", func(context.Context) (int64, time.Duration, error) {
		return depth, 90 * time.Second, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Unregister()
	for _, want := range []int64{5, 7} {
		depth = want
		rm := o.collect(t)
		g, ok := metric(t, rm, "inbox.queue.depth").Data.(metricdata.Gauge[int64])
		if !ok || len(g.DataPoints) != 1 || g.DataPoints[0].Value != want {
			t.Errorf("inbox.queue.depth %+v, want %d", g, want)
		}
		age, ok := metric(t, rm, "inbox.queue.oldest_age").Data.(metricdata.Gauge[float64])
		if !ok || len(age.DataPoints) != 1 || age.DataPoints[0].Value != 90 {
			t.Errorf("inbox.queue.oldest_age %+v, want 90", age)
		}
	}
}

func attr(kvs []attribute.KeyValue, key attribute.Key) attribute.Value {
	for _, kv := range kvs {
		if kv.Key == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

func metric(t *testing.T, rm metricdata.ResourceMetrics, name string) metricdata.Metrics {
	t.Helper()
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m
			}
		}
	}
	t.Fatalf("no metric %s", name)
	return metricdata.Metrics{}
}

// sums adds up the counter name's data points by the value of attribute by.
func sums(t *testing.T, rm metricdata.ResourceMetrics, name string, by attribute.Key) map[string]int64 {
	t.Helper()
	sum, ok := metric(t, rm, name).Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is not an int64 sum", name)
	}
	out := map[string]int64{}
	for _, dp := range sum.DataPoints {
		v, _ := dp.Attributes.Value(by)
		out[v.AsString()] += dp.Value
	}
	return out
}

func histogramCount(t *testing.T, rm metricdata.ResourceMetrics, name string) uint64 {
	t.Helper()
	h, ok := metric(t, rm, name).Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is not a float64 histogram", name)
	}
	var n uint64
	for _, dp := range h.DataPoints {
		n += dp.Count
	}
	return n
}

// TestCancelledRowsAreNotErrors: a row an operator cancelled (inbox.Cancel) settles with the
// outcome cancel and ErrCancelled as its reason: its span says cancel, with no error status.
func TestCancelledRowsAreNotErrors(t *testing.T) {
	o := newObserved(t)
	d := &inbox.Delivery{ID: 7, Attempt: 1}
	u := inbox.Unit{Queue: "q", Form: "lease", Table: "jobs", Deliveries: []*inbox.Delivery{d}, Claimed: time.Now()}
	ctx := o.obs.Handling(context.Background(), u)
	o.obs.Settled(ctx, inbox.Settlement{Queue: "q", Form: "lease", Table: "jobs", Deliveries: u.Deliveries,
		Outcomes: []outcome.Outcome{outcome.Cancel().WithError(inbox.ErrCancelled)}})
	got := o.spans.GetSpans()
	if len(got) != 1 || got[0].Status.Code == codes.Error || attr(got[0].Attributes, inboxotel.AttrOutcome).AsString() != "cancel" {
		t.Fatalf("spans %v, want one whose outcome is cancel, without an error status", got)
	}
}
