package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

// TestExamplePrintsSpansAndMetrics runs the example and looks for what it promises to print.
func TestExamplePrintsSpansAndMetrics(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), &out); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"Name": "publish invoices"`, `"Name": "process invoices"`, `"Name": "inbox.settled"`, `"Name": "inbox.handler.duration"`, `"Name": "inbox.queue.depth"`} {
		if n := strings.Count(out.String(), want); n == 0 {
			t.Errorf("the output has no %s:\n%s", want, out.String())
		}
	}
	if n := strings.Count(out.String(), `"Name": "process invoices"`); n != 3 {
		t.Errorf("%d delivery spans printed, want 3", n)
	}
}
