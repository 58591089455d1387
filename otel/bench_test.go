package inboxotel_test

import (
	"context"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	inboxotel "github.com/sqlinbox/inbox/otel"
	"github.com/sqlinbox/inbox/outcome"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// BenchmarkObserver is what the observer costs a delivery, its Handling and its Settled, with
// the SDK's providers (every span sampled and exported to tracetest's no-op exporter, the metrics
// aggregated) and with the global no-op providers.
func BenchmarkObserver(b *testing.B) {
	sdk := &inboxotel.Config{
		TracerProvider: sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter())),
		MeterProvider:  sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader())),
	}
	for _, tc := range []struct {
		name string
		cfg  *inboxotel.Config
	}{{"sdk", sdk}, {"noop", nil}} {
		b.Run(tc.name, func(b *testing.B) {
			obs, err := inboxotel.NewObserver(tc.cfg)
			if err != nil {
				b.Fatal(err)
			}
			d := &inbox.Delivery{ID: 1, Attempt: 1, Headers: map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}}
			u := inbox.Unit{Queue: "q", Form: "lease", Table: "jobs", Deliveries: []*inbox.Delivery{d}, Claimed: time.Now()}
			s := inbox.Settlement{Queue: "q", Form: "lease", Table: "jobs", Deliveries: u.Deliveries, Outcomes: []outcome.Outcome{outcome.Ack()}, HandlerDuration: time.Millisecond}
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				obs.Settled(obs.Handling(ctx, u), s)
			}
		})
	}
}
