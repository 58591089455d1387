// Package inboxotel reports a github.com/sqlinbox/inbox consumer to OpenTelemetry: a span per
// delivery from its claim to its settlement, linked to the span that published the row; a
// counter of settled rows per outcome; histograms of handler and settlement durations; and,
// from a function of yours, gauges of a queue's depth and the age of its oldest due row.
//
// It is a module of its own (github.com/sqlinbox/inbox/otel), so that the library itself stays
// standard-library only. Publish with Inject to carry the publisher's trace context in the
// row's headers (the table needs a Headers column; without one, spans have no link), and set
// an Observer as the consumer's inbox.Config.Observer:
//
//	m := inbox.Message{Queue: "invoices", Payload: payload}
//	inboxotel.Inject(ctx, &m)
//	err := inbox.Enqueue(ctx, db, d, jobs, m)
//
//	obs, err := inboxotel.NewObserver(nil) // the global tracer and meter providers
//	c := inbox.NewConsumer(db, form, h, &inbox.Config{Queue: "invoices", Observer: obs})
//
// The handler's context carries the delivery's span (a batch handler's, the batch's span,
// whose children are its deliveries' spans), so spans the handler starts are its children. A
// delivery's span ends with status Error, and its error recorded, where the delivery failed: its
// row died (outcome fail), or the outcome the consumer applied carries an error (a handler's
// error, a panic, a zero outcome, a payload that did not decode, a drop with a reason), or its
// settlement failed. A batch's span is an error where any of its rows failed.
package inboxotel

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/admin"
	"github.com/sqlinbox/inbox/outcome"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/sqlinbox/inbox/otel"

// The attributes set on spans and metrics.
const (
	AttrQueue   = attribute.Key("inbox.queue")   // Config.Queue (empty where the table is one queue)
	AttrForm    = attribute.Key("inbox.form")    // "rowlock", "lease", "advisory"
	AttrTable   = attribute.Key("inbox.table")   // the table's name
	AttrOutcome = attribute.Key("inbox.outcome") // "ack", "drop", "retry", "retry_after", "fail", "cancel"
	AttrAttempt = attribute.Key("inbox.attempt") // Delivery.Attempt (spans only)
	AttrKind    = attribute.Key("inbox.kind")    // Delivery.Kind, the row's kind of job; set only where it has one
	AttrID      = attribute.Key("messaging.message.id")
	AttrError   = attribute.Key("error.type") // why a settlement or a claim failed (see errorType)
)

// traceContext carries trace context in a row's headers: W3C traceparent and tracestate.
var traceContext = propagation.TraceContext{}

// Inject puts ctx's span context in m's headers (W3C traceparent and tracestate), for the
// consumer's span to link to. It leaves m alone when ctx carries no span.
func Inject(ctx context.Context, m *inbox.Message) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	if m.Headers == nil {
		m.Headers = map[string]string{}
	}
	traceContext.Inject(ctx, propagation.MapCarrier(m.Headers))
}

// Config configures an Observer. A nil *Config, and every nil field, takes the default.
type Config struct {
	// TracerProvider starts the spans. Default: otel.GetTracerProvider().
	TracerProvider trace.TracerProvider
	// MeterProvider makes the instruments. Default: otel.GetMeterProvider().
	MeterProvider metric.MeterProvider
}

// Observer is an inbox.Observer reporting to OpenTelemetry. One Observer may serve any
// number of consumers; the attributes tell their queues apart.
type Observer struct {
	tracer   trace.Tracer
	meter    metric.Meter
	settled  metric.Int64Counter
	failed   metric.Int64Counter
	handler  metric.Float64Histogram
	settling metric.Float64Histogram

	mu   sync.RWMutex
	sets map[attrKey]metric.MeasurementOption // the metrics' attribute sets, made once each
}

var _ inbox.Observer = (*Observer)(nil)

// attrKey names one attribute set of the metrics; an empty field is not an attribute.
type attrKey struct {
	queue, form, table string
	kind               string // the rows' kind of job; empty: none, or a batch of several
	outcome            outcome.Kind
	errorType          string
}

// attrs returns the attribute set k names, made at its first use: a measurement then costs no
// allocation for its attributes.
func (o *Observer) attrs(k attrKey) metric.MeasurementOption {
	o.mu.RLock()
	opt, ok := o.sets[k]
	o.mu.RUnlock()
	if ok {
		return opt
	}
	kvs := []attribute.KeyValue{AttrQueue.String(k.queue), AttrForm.String(k.form), AttrTable.String(k.table)}
	if k.kind != "" {
		kvs = append(kvs, AttrKind.String(k.kind))
	}
	if k.outcome != outcome.KindNone {
		kvs = append(kvs, AttrOutcome.String(outcomeName(k.outcome)))
	}
	if k.errorType != "" {
		kvs = append(kvs, AttrError.String(k.errorType))
	}
	opt = metric.WithAttributeSet(attribute.NewSet(kvs...))
	o.mu.Lock()
	defer o.mu.Unlock()
	o.sets[k] = opt
	return opt
}

// NewObserver returns an Observer reporting to cfg's providers. Its instruments:
//
//	inbox.settled            counter, {message}   rows settled, by queue, form, kind and outcome
//	inbox.claim.failures     counter, {claim}     claims that failed, by queue, form and error.type
//	inbox.handler.duration   histogram, s         how long each handler call ran (a batch's: once), by kind
//	inbox.settle.duration    histogram, s         how long each settlement took, by kind, and by error.type when it failed
//
// The kind (inbox.kind) is an attribute only where the rows have one (Delivery.Kind: a table
// with a Kind column), and on a histogram only where every row of the unit has the same.
// A settlement that failed counts its rows in inbox.settled with error.type set: their outcome
// was not applied (of a lease batch's, the rows its *inbox.LeaseLostError names; the others
// settled). Their spans end with an error status.
func NewObserver(cfg *Config) (*Observer, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.TracerProvider == nil {
		c.TracerProvider = otel.GetTracerProvider()
	}
	if c.MeterProvider == nil {
		c.MeterProvider = otel.GetMeterProvider()
	}
	o := &Observer{tracer: c.TracerProvider.Tracer(ScopeName), meter: c.MeterProvider.Meter(ScopeName), sets: map[attrKey]metric.MeasurementOption{}}
	var errs [4]error
	o.settled, errs[0] = o.meter.Int64Counter("inbox.settled", metric.WithUnit("{message}"),
		metric.WithDescription("Rows settled, by outcome; with error.type, rows whose settlement failed."))
	o.failed, errs[1] = o.meter.Int64Counter("inbox.claim.failures", metric.WithUnit("{claim}"),
		metric.WithDescription("Claims that failed."))
	o.handler, errs[2] = o.meter.Float64Histogram("inbox.handler.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a handler call ran."))
	o.settling, errs[3] = o.meter.Float64Histogram("inbox.settle.duration", metric.WithUnit("s"),
		metric.WithDescription("How long a settlement took."))
	if err := errors.Join(errs[:]...); err != nil {
		return nil, fmt.Errorf("inboxotel: making the instruments: %w", err)
	}
	return o, nil
}

// Claimed counts a failed claim.
func (o *Observer) Claimed(ctx context.Context, c inbox.Claim) {
	if c.Err != nil {
		o.failed.Add(ctx, 1, o.attrs(attrKey{queue: c.Queue, form: c.Form, table: c.Table, errorType: errorType(c.Err)}))
	}
}

// spans are a unit's spans, carried from Handling to Settled in the handler's context.
type spans struct {
	unit trace.Span   // the handler's span: the delivery's, or the batch's
	rows []trace.Span // a batch's deliveries' spans, children of unit; nil for one delivery
}

type spansKey struct{}

// Handling starts the unit's spans at its claim, links each to its publisher's span, and puts
// the unit's span in the handler's context.
func (o *Observer) Handling(ctx context.Context, u inbox.Unit) context.Context {
	common := []attribute.KeyValue{AttrQueue.String(u.Queue), AttrForm.String(u.Form), AttrTable.String(u.Table)}
	name := "process " + destination(u.Queue, u.Table)
	start := trace.WithTimestamp(u.Claimed)
	if len(u.Deliveries) == 1 {
		d := u.Deliveries[0]
		ctx, span := o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), start,
			trace.WithLinks(publisher(d)...), trace.WithAttributes(append(common, deliveryAttrs(d)...)...))
		return context.WithValue(ctx, spansKey{}, &spans{unit: span})
	}
	var links []trace.Link
	for _, d := range u.Deliveries {
		links = append(links, publisher(d)...)
	}
	ctx, batch := o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), start, trace.WithLinks(links...),
		trace.WithAttributes(append(common, attribute.Int("messaging.batch.message_count", len(u.Deliveries)))...))
	s := &spans{unit: batch, rows: make([]trace.Span, len(u.Deliveries))}
	for i, d := range u.Deliveries {
		_, s.rows[i] = o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindConsumer), start,
			trace.WithLinks(publisher(d)...), trace.WithAttributes(append(common, deliveryAttrs(d)...)...))
	}
	return context.WithValue(ctx, spansKey{}, s)
}

// Settled ends the unit's spans with their outcomes and records the metrics.
func (o *Observer) Settled(ctx context.Context, st inbox.Settlement) {
	where := attrKey{queue: st.Queue, form: st.Form, table: st.Table, kind: unitKind(st.Deliveries)}
	if st.HandlerDuration > 0 {
		o.handler.Record(ctx, st.HandlerDuration.Seconds(), o.attrs(where))
	}
	settleErr := ""
	if st.Err != nil {
		settleErr = errorType(st.Err)
	}
	where.errorType = settleErr
	o.settling.Record(ctx, st.SettleDuration.Seconds(), o.attrs(where))
	for i, out := range st.Outcomes {
		where.outcome, where.errorType, where.kind = out.Kind(), "", st.Deliveries[i].Kind
		if failed(st, st.Deliveries[i].ID) {
			where.errorType = settleErr
		}
		o.settled.Add(ctx, 1, o.attrs(where))
	}

	s, _ := ctx.Value(spansKey{}).(*spans)
	if s == nil {
		return
	}
	end := func(span trace.Span, d *inbox.Delivery, out outcome.Outcome) (failedRow bool) {
		span.SetAttributes(AttrOutcome.String(outcomeName(out.Kind())))
		if err := d.DecodeError(); err != nil && out.Err() != err {
			span.RecordError(err)
		}
		var why string
		if why, failedRow = failure(out); failedRow {
			if out.Err() != nil {
				span.RecordError(out.Err())
			}
			span.SetStatus(codes.Error, why)
		}
		if failed(st, d.ID) {
			span.RecordError(st.Err)
			span.SetStatus(codes.Error, "settlement failed: "+settleErr)
		}
		span.End()
		return failedRow
	}
	if s.rows == nil {
		end(s.unit, st.Deliveries[0], st.Outcomes[0])
		return
	}
	rowsFailed := 0
	for i, span := range s.rows {
		if end(span, st.Deliveries[i], st.Outcomes[i]) {
			rowsFailed++
		}
	}
	if rowsFailed > 0 {
		s.unit.SetStatus(codes.Error, fmt.Sprintf("%d of %d rows failed", rowsFailed, len(s.rows)))
	}
	if st.Err != nil {
		s.unit.RecordError(st.Err)
		s.unit.SetStatus(codes.Error, "settlement failed: "+settleErr)
	}
	s.unit.End()
}

// failure says whether a delivery settled by out failed, and how, for its span's status: its row
// died (Fail), or its outcome carries an error (a handler's error, a panic, a zero outcome, a
// payload that did not decode, a drop with a reason). An Ack, a Cancel (an operator's, which
// carries inbox.ErrCancelled), and a Drop, Retry or RetryAfter the handler chose without a
// reason, are not failures.
func failure(out outcome.Outcome) (why string, failed bool) {
	switch {
	case out.Kind() == outcome.KindAck, out.Kind() == outcome.KindCancel:
		return "", false
	case out.Err() != nil:
		return outcomeName(out.Kind()) + ": " + out.Err().Error(), true
	}
	return outcomeName(out.Kind()), out.Kind() == outcome.KindFail
}

// failed reports whether the settlement st left row id unchanged: every row of a settlement
// that failed, but those a lease batch's *inbox.LeaseLostError does not name.
func failed(st inbox.Settlement, id int64) bool {
	var lost *inbox.LeaseLostError
	if errors.As(st.Err, &lost) {
		return slices.Contains(lost.IDs, id)
	}
	return st.Err != nil
}

// StatsFunc reads a queue's depth (rows due now) and the age of its oldest due row (zero when
// none is due; negative when it is unknown). AdminStats serves, or a query of your own.
type StatsFunc func(ctx context.Context) (depth int64, oldest time.Duration, err error)

// AdminStats is the StatsFunc of queue ("" for a table without a Queue column) read from a's
// counts (admin.Stats): its due rows, and how long its oldest due row has waited, since its
// retry_after or, for a row never delayed, its publishing where the table names a CreatedAt
// column; negative (admin.Unknown) where a due row has neither. admin.Stats is one statement
// that reads the whole table, at each collection: on a large table, collect seldom.
func AdminStats(a *admin.Admin, queue string) StatsFunc {
	return func(ctx context.Context) (int64, time.Duration, error) {
		stats, err := a.Stats(ctx)
		if err != nil {
			return 0, 0, err
		}
		for _, s := range stats {
			if s.Queue == queue {
				return s.Due, s.OldestDue, nil
			}
		}
		return 0, 0, nil
	}
}

// WatchQueue registers two gauges read from stats at each collection, with queue and table
// as attributes: inbox.queue.depth ({message}) and inbox.queue.oldest_age (s), which is not
// recorded while stats says the age is unknown. A collection at which stats fails records
// neither and returns its error to the SDK (which hands it to otel's error handler).
// Unregister the returned registration when the queue goes.
func (o *Observer) WatchQueue(queue, table string, stats StatsFunc) (metric.Registration, error) {
	depth, err := o.meter.Int64ObservableGauge("inbox.queue.depth", metric.WithUnit("{message}"),
		metric.WithDescription("Rows of the queue due now."))
	if err != nil {
		return nil, fmt.Errorf("inboxotel: queue %q: making inbox.queue.depth: %w", queue, err)
	}
	oldest, err := o.meter.Float64ObservableGauge("inbox.queue.oldest_age", metric.WithUnit("s"),
		metric.WithDescription("How long the queue's oldest due row has been due."))
	if err != nil {
		return nil, fmt.Errorf("inboxotel: queue %q: making inbox.queue.oldest_age: %w", queue, err)
	}
	attrs := metric.WithAttributes(AttrQueue.String(queue), AttrTable.String(table))
	return o.meter.RegisterCallback(func(ctx context.Context, m metric.Observer) error {
		n, age, err := stats(ctx)
		if err != nil {
			return fmt.Errorf("inboxotel: queue %q of table %q: reading its stats: %w", queue, table, err)
		}
		m.ObserveInt64(depth, n, attrs)
		if age >= 0 {
			m.ObserveFloat64(oldest, age.Seconds(), attrs)
		}
		return nil
	}, depth, oldest)
}

// publisher returns a link to the span that published d, where its headers carry one.
func publisher(d *inbox.Delivery) []trace.Link {
	if d.Headers["traceparent"] == "" {
		return nil
	}
	sc := trace.SpanContextFromContext(traceContext.Extract(context.Background(), propagation.MapCarrier(d.Headers)))
	if !sc.IsValid() {
		return nil
	}
	return []trace.Link{{SpanContext: sc}}
}

func deliveryAttrs(d *inbox.Delivery) []attribute.KeyValue {
	if d.Kind != "" {
		return []attribute.KeyValue{AttrID.Int64(d.ID), AttrAttempt.Int(d.Attempt), AttrKind.String(d.Kind)}
	}
	return []attribute.KeyValue{AttrID.Int64(d.ID), AttrAttempt.Int(d.Attempt)}
}

// unitKind is the kind of job every delivery of a unit has; empty where they have none, or
// several.
func unitKind(ds []*inbox.Delivery) string {
	if len(ds) == 0 {
		return ""
	}
	kind := ds[0].Kind
	for _, d := range ds[1:] {
		if d.Kind != kind {
			return ""
		}
	}
	return kind
}

// destination names a span's queue: the queue, or the table where it is one queue.
func destination(queue, table string) string {
	if queue == "" {
		return table
	}
	return queue
}

func outcomeName(k outcome.Kind) string {
	return strings.ReplaceAll(k.String(), " ", "_")
}

// errorType names an error of the library by its sentinel, "other" otherwise.
func errorType(err error) string {
	for _, s := range []struct {
		err  error
		name string
	}{
		{inbox.ErrLeaseLost, "lease_lost"},
		{inbox.ErrClosed, "closed"},
		{inbox.ErrTransactionHeld, "transaction_held"},
		{inbox.ErrTransactionEnded, "transaction_ended"},
		{inbox.ErrCommitUnknown, "commit_unknown"},
	} {
		if errors.Is(err, s.err) {
			return s.name
		}
	}
	return "other"
}
