package inbox

import (
	"context"
	"strings"
	"testing"

	"github.com/sqlinbox/inbox/outcome"
)

// refused runs build and returns the message it panicked with, failing the test where it did
// not panic or panicked with something other than an inbox: message naming want.
func refused(t *testing.T, want string, build func()) {
	t.Helper()
	var p any
	func() {
		defer func() { p = recover() }()
		build()
	}()
	msg, ok := p.(string)
	switch {
	case p == nil:
		t.Fatalf("built without a panic; want one naming %q", want)
	case !ok:
		t.Fatalf("panicked with %T %v, want a string", p, p)
	case !strings.HasPrefix(msg, "inbox: ") || !strings.Contains(msg, want):
		t.Fatalf("panicked with %q, want an inbox: message naming %q", msg, want)
	}
}

// TestNilHandlerRefusedAtConstruction: a consumer without a handler (nil, or a nil func of a
// handler type) or without a form is refused where it is built, before Run could claim a row
// and burn an attempt on a nil-pointer panic; so are the adapters given a nil func.
func TestNilHandlerRefusedAtConstruction(t *testing.T) {
	db := noDB(0)
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	bh := BatchHandlerFunc(func(_ context.Context, ds []*Delivery) []outcome.Outcome { return make([]outcome.Outcome, len(ds)) })
	batches := &fakeBatchForm{fakeForm: newFakeForm("nil_batch")}
	for _, tc := range []struct {
		name, want string
		build      func()
	}{
		{"nil handler", "handler is nil", func() { NewConsumer(db, newFakeForm("nil_h"), nil, nil) }},
		{"nil HandlerFunc", "handler is nil", func() { NewConsumer(db, newFakeForm("nil_hf"), HandlerFunc(nil), nil) }},
		{"nil form", "form is nil", func() { NewConsumer(db, nil, h, nil) }},
		{"nil batch handler", "handler is nil", func() { NewBatchConsumer(db, batches, 4, nil, nil) }},
		{"nil BatchHandlerFunc", "handler is nil", func() { NewBatchConsumer(db, batches, 4, BatchHandlerFunc(nil), nil) }},
		{"nil batch form", "form is nil", func() { NewBatchConsumer(db, nil, 4, bh, nil) }},
		{"JSON of nil", "JSON", func() { JSON[int](nil) }},
		{"Func of nil", "Func", func() { Func(nil) }},
		{"JSONFunc of nil", "JSONFunc", func() { JSONFunc[int](nil) }},
		{"JSONBatch of nil", "JSONBatch", func() { JSONBatch[int](nil) }},
		{"JSONBatchFunc of nil", "JSONBatchFunc", func() { JSONBatchFunc[int](nil) }},
	} {
		t.Run(tc.name, func(t *testing.T) { refused(t, tc.want, tc.build) })
	}
}
