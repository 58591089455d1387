package inbox

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/sqlinbox/inbox/outcome"
)

// Handler handles one delivery and says what to do with its row. It may run as long as it
// needs (the lease form extends its hold meanwhile) and should return soon after ctx is done:
// at shutdown the consumer cancels ctx when the shutdown timeout runs out, then abandons the
// handler.
type Handler interface {
	Handle(ctx context.Context, d *Delivery) outcome.Outcome
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, d *Delivery) outcome.Outcome

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, d *Delivery) outcome.Outcome { return f(ctx, d) }

// JSON adapts a function of a decoded payload to Handler: the payload is decoded into a T with
// encoding/json before f is called. A payload that does not decode never reaches f; the
// consumer settles it by Config.UndecodablePayload (Drop unless set) and logs it.
func JSON[T any](f func(ctx context.Context, d *Delivery, v T) outcome.Outcome) Handler {
	return HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		var v T
		if err := json.Unmarshal(d.Payload, &v); err != nil {
			d.Undecodable(fmt.Errorf("payload of row %d does not decode into %T: %w", d.ID, v, err))
			return outcome.Outcome{}
		}
		return f(ctx, d, v)
	})
}
