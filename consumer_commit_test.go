package inbox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// commitUnknownForm fails every settlement as one whose COMMIT was sent and never answered.
type commitUnknownForm struct{ *fakeForm }

func (f commitUnknownForm) Settle(ctx context.Context, d *Delivery, o outcome.Outcome) error {
	f.fakeForm.Settle(ctx, d, o)
	return fmt.Errorf("committing the ack of row %d: %w: the connection broke after the COMMIT was sent", d.ID, ErrCommitUnknown)
}

// TestConsumerSaysASettlementsOutcomeIsUnknown: a settlement whose COMMIT may have committed is
// not logged as one whose rows return to the queue.
func TestConsumerSaysASettlementsOutcomeIsUnknown(t *testing.T) {
	f := commitUnknownForm{newFakeForm("jobs", 1)}
	var logs logBuffer
	h := HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() })
	c := NewConsumer(noDB(0), f, h, &Config{PollInterval: 10 * time.Millisecond, Logger: logs.logger()})
	if err := runUntil(t, c, func() bool { return f.settledCount() == 1 && strings.Contains(logs.String(), "level=ERROR") }); err != nil {
		t.Fatal(err)
	}
	out := logs.String()
	if !strings.Contains(out, "outcome unknown") || strings.Contains(out, "the rows return to the queue") {
		t.Fatalf("log %q: want the settlement's outcome said to be unknown, not its rows said to return", out)
	}
}
