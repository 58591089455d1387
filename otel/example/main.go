// Command example runs a consumer of a SQLite queue with the inboxotel observer, and prints
// the spans and metrics it reports with OpenTelemetry's stdout exporters: a publish span, a
// span per delivery linked to it, the settled counter and the handler duration histogram, and
// the queue's depth gauge.
//
//	go run ./otel/example
package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	_ "github.com/glebarez/go-sqlite"
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/lease"
	inboxotel "github.com/sqlinbox/inbox/otel"
	"github.com/sqlinbox/inbox/outcome"
	"go.opentelemetry.io/otel/exporters/stdout/stdoutmetric"
	"go.opentelemetry.io/otel/exporters/stdout/stdouttrace"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "example:", err)
		os.Exit(1)
	}
}

// run publishes three rows inside a span, consumes them, and writes the spans and then the
// metrics to w.
func run(ctx context.Context, w io.Writer) error {
	dir, err := os.MkdirTemp("", "inboxotel-example")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "jobs.db")+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(4)
	if _, err := db.ExecContext(ctx, `CREATE TABLE jobs (id INTEGER PRIMARY KEY, payload BLOB, attempt INT NOT NULL DEFAULT 0, grp TEXT NOT NULL DEFAULT '', headers TEXT, retry_after TEXT, locked_until TEXT)`); err != nil {
		return err
	}
	jobs := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload", Attempt: "attempt", Queue: "grp", Headers: "headers", RetryAfter: "retry_after"}
	d := dialect.SQLite[isolation.Immediate]{}

	spanOut, err := stdouttrace.New(stdouttrace.WithWriter(w), stdouttrace.WithPrettyPrint())
	if err != nil {
		return err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spanOut))
	metricOut, err := stdoutmetric.New(stdoutmetric.WithWriter(w), stdoutmetric.WithPrettyPrint())
	if err != nil {
		return err
	}
	reader := sdkmetric.NewPeriodicReader(metricOut, sdkmetric.WithInterval(time.Hour)) // exported at Shutdown
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))

	// Publish inside a span: Inject carries its trace context in each row's headers.
	pctx, publish := tp.Tracer("example").Start(ctx, "publish invoices")
	for i := 1; i <= 3; i++ {
		m := inbox.Message{Queue: "invoices", Payload: fmt.Appendf(nil, `{"number":%d}`, i)}
		inboxotel.Inject(pctx, &m)
		if err := inbox.Enqueue(pctx, db, d, jobs, m); err != nil {
			return err
		}
	}
	publish.End()

	obs, err := inboxotel.NewObserver(&inboxotel.Config{TracerProvider: tp, MeterProvider: mp})
	if err != nil {
		return err
	}
	depth := func(ctx context.Context) (int64, time.Duration, error) {
		var n int64
		err := db.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE grp = 'invoices'`).Scan(&n)
		return n, 0, err
	}
	if _, err := obs.WatchQueue("invoices", "jobs", depth); err != nil {
		return err
	}
	handled := make(chan struct{}, 3)
	h := inbox.HandlerFunc(func(ctx context.Context, dl *inbox.Delivery) outcome.Outcome {
		defer func() { handled <- struct{}{} }()
		return outcome.Ack()
	})
	cctx, stop := context.WithCancel(ctx)
	errc := make(chan error, 1)
	c := inbox.NewConsumer(db, lease.New(d, jobs, nil), h, &inbox.Config{Queue: "invoices", Observer: obs})
	go func() { errc <- c.Run(cctx) }()
	for range 3 {
		select {
		case <-handled:
		case err := <-errc: // the consumer stopped before handling the rows
			stop()
			return fmt.Errorf("the consumer stopped: %w", err)
		}
	}
	stop()
	if err := <-errc; err != nil {
		return err
	}
	if err := tp.Shutdown(ctx); err != nil {
		return err
	}
	return mp.Shutdown(ctx) // collects and prints the metrics once
}
