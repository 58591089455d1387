package inbox

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

func TestExponentialBackoffStaysInItsBand(t *testing.T) {
	b := ExponentialBackoff{Base: 10 * time.Millisecond, Max: 80 * time.Millisecond}
	for attempt, d := range map[int]time.Duration{1: 10, 2: 20, 3: 40, 4: 80, 5: 80, 60: 80} {
		d *= time.Millisecond
		for range 200 {
			if got := b.Delay(attempt); got < d/2 || got >= d {
				t.Fatalf("Delay(%d) = %v, want in [%v, %v)", attempt, got, d/2, d)
			}
		}
	}
	var def ExponentialBackoff
	if got := def.Delay(1); got < 500*time.Millisecond || got >= time.Second {
		t.Fatalf("default Delay(1) = %v, want in [0.5s, 1s)", got)
	}
	if got := def.Delay(1000); got < 30*time.Minute || got >= time.Hour {
		t.Fatalf("default Delay(1000) = %v, want in [30m, 1h)", got)
	}
	if RetryAtOnce.Delay(7) != 0 {
		t.Fatal("RetryAtOnce delays")
	}
}

func TestResultOfHandlerErrors(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		err   error
		kind  outcome.Kind
		delay time.Duration
	}{
		{nil, outcome.KindAck, 0},
		{boom, outcome.KindRetry, 0},
		{fmt.Errorf("wrapped: %w", Permanent(boom)), outcome.KindFail, 0},
		{fmt.Errorf("wrapped: %w", RetryIn(time.Minute, boom)), outcome.KindRetryAfter, time.Minute},
	}
	for _, tt := range tests {
		o := Result(tt.err)
		if o.Kind() != tt.kind || o.Delay() != tt.delay || o.Err() != tt.err {
			t.Errorf("Result(%v) = %v (delay %v, err %v), want %v after %v with the error", tt.err, o, o.Delay(), o.Err(), tt.kind, tt.delay)
		}
	}
	if Permanent(nil) != nil || RetryIn(time.Second, nil) != nil {
		t.Error("marking a nil error is not nil")
	}
}

// resolving returns a consumer whose table has the lifecycle columns life, as Run leaves it.
func resolving(life lifecycle, cfg *Config, logs *logBuffer) *Consumer {
	if cfg == nil {
		cfg = &Config{}
	}
	if logs != nil {
		cfg.Logger = logs.logger()
	}
	c := &Consumer{}
	c.configure(cfg)
	c.life = life
	return c
}

func TestResolveAppliesThePolicyAndTheLimit(t *testing.T) {
	all := lifecycle{Attempt: true, RetryAfter: true, DeadAt: true, LastError: true}
	boom := errors.New("boom")
	c := resolving(all, &Config{Retry: ExponentialBackoff{Base: time.Second, Max: time.Second}, MaxAttempts: 3}, nil)

	o := c.resolve(&Delivery{ID: 1, Attempt: 1}, outcome.Retry().WithError(boom))
	if o.Kind() != outcome.KindRetryAfter || o.Delay() < 500*time.Millisecond || o.Err() != boom {
		t.Errorf("a retry below the limit = %v (err %v), want a retry after the policy's delay with its error", o, o.Err())
	}
	if o := c.resolve(&Delivery{ID: 1, Attempt: 1}, outcome.RetryAfter(time.Hour)); o.Delay() != time.Hour {
		t.Errorf("an explicit RetryAfter(1h) = %v, want it kept", o)
	}
	if o := c.resolve(&Delivery{ID: 1, Attempt: 2}, outcome.Outcome{}); o.Kind() != outcome.KindRetryAfter || !errors.Is(o.Err(), errNoOutcome) {
		t.Errorf("the zero outcome = %v (err %v), want a retry by the policy, saying why", o, o.Err())
	}
	o = c.resolve(&Delivery{ID: 1, Attempt: 3}, outcome.RetryAfter(time.Hour).WithError(boom))
	if o.Kind() != outcome.KindFail || !errors.Is(o.Err(), boom) || o.Err().Error() != "attempt 3 of 3: boom" {
		t.Errorf("a retry at the limit = %v (err %v), want a Fail with \"attempt 3 of 3: boom\"", o, o.Err())
	}
	for _, k := range []outcome.Outcome{outcome.Ack(), outcome.Drop()} {
		if got := c.resolve(&Delivery{ID: 1, Attempt: 3}, k); got != k {
			t.Errorf("%v at the limit = %v, want it unchanged", k, got)
		}
	}

	unlimited := resolving(all, &Config{MaxAttempts: -1}, nil)
	if o := unlimited.resolve(&Delivery{ID: 1, Attempt: 1000}, outcome.Retry()); o.Kind() != outcome.KindRetryAfter {
		t.Errorf("with no limit, attempt 1000 = %v, want a retry", o)
	}
	uncounted := resolving(lifecycle{RetryAfter: true, DeadAt: true}, nil, nil)
	if o := uncounted.resolve(&Delivery{ID: 1}, outcome.Retry()); o.Kind() != outcome.KindRetryAfter {
		t.Errorf("without an attempt column = %v, want a retry (no limit)", o)
	}
}

func TestResolveWithoutLifecycleColumns(t *testing.T) {
	var logs logBuffer
	c := resolving(lifecycle{Attempt: true}, &Config{Retry: RetryAtOnce, MaxAttempts: 2}, &logs)
	if o := c.resolve(&Delivery{ID: 4, Attempt: 1}, outcome.Retry()); o.Kind() != outcome.KindRetry {
		t.Errorf("RetryAtOnce without retry_after = %v, want a retry at once", o)
	}
	for range 3 {
		if o := c.resolve(&Delivery{ID: 4, Attempt: 1}, outcome.RetryAfter(time.Minute)); o.Kind() != outcome.KindRetry {
			t.Errorf("RetryAfter without retry_after = %v, want a retry at once", o)
		}
	}
	if n := strings.Count(logs.String(), "without a retry_after column"); n != 1 {
		t.Errorf("RetryAfter without the column logged %d times, want once per consumer:\n%s", n, logs.String())
	}
	d := &Delivery{ID: 4, Attempt: 2}
	o := c.resolve(d, outcome.Retry().WithError(errors.New("boom")))
	if o.Kind() != outcome.KindDrop || o.Err() == nil || o.Err().Error() != "attempt 2 of 2: boom" {
		t.Errorf("a dying row without dead_at = %v (err %v), want a Drop with its last error", o, o.Err())
	}
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("the death was logged before its drop settled:\n%s", logs.String())
	}
	settling(c).settledAs([]*Delivery{d}, []outcome.Outcome{o}, nil)
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "DeadAt") || !strings.Contains(out, "id=4") {
		t.Errorf("the dropped dying row was not logged at ERROR with its id, saying to name DeadAt:\n%s", out)
	}
	if c.backoff(d, errors.New("refused")).Kind() != outcome.KindFail {
		t.Error("the back-off at the limit without dead_at is not a Fail, which the forms apply as a drop and tell from a settlement's")
	}
}

// settling is a run of c as far as its settlements' logs need one.
func settling(c *Consumer) *run { return &run{c: c, log: c.log, failed: map[failureKey]struct{}{}} }

// TestSettledAsSaysOnceWhatAFailedSettlementLeaves: a row whose death failed at its limit is
// said once at ERROR however often its settlement's error comes back; a settlement whose
// connection was lost is a warning that no attempt was counted, not a failed settlement.
func TestSettledAsSaysOnceWhatAFailedSettlementLeaves(t *testing.T) {
	var logs logBuffer
	r := settling(resolving(lifecycle{Attempt: true}, &Config{Retry: RetryAtOnce, MaxAttempts: 3}, &logs))
	d := &Delivery{ID: 9, Attempt: 3}
	dead := fmt.Errorf("%w: table \"jobs\", row 9: its death failed too", ErrDeathFailed)
	for range 3 {
		r.settledAs([]*Delivery{d}, []outcome.Outcome{outcome.Ack()}, dead)
	}
	if n := strings.Count(logs.String(), "level=ERROR"); n != 1 || !strings.Contains(logs.String(), "can neither settle nor die") {
		t.Errorf("a row whose death failed was logged at ERROR %d times, want once, saying it can neither settle nor die:\n%s", n, logs.String())
	}

	var lostLogs logBuffer
	r = settling(resolving(lifecycle{Attempt: true}, &Config{Retry: RetryAtOnce}, &lostLogs))
	lost := fmt.Errorf("inbox: table \"jobs\", row 9: ack: %w", errors.New("invalid connection")) // go-sql-driver/mysql's
	r.settledAs([]*Delivery{d}, []outcome.Outcome{outcome.Ack()}, lost)
	if out := lostLogs.String(); strings.Contains(out, "level=ERROR") || !strings.Contains(out, "level=WARN") || !strings.Contains(out, "connection was lost") {
		t.Errorf("a settlement whose connection was lost: want a warning that says so, and no error:\n%s", out)
	}
}

func TestRunRefusesADelayingPolicyWithoutRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		retry  RetryPolicy
		refuse bool
	}{{nil, true}, {ExponentialBackoff{Base: time.Millisecond}, true}, {RetryAtOnce, false}} {
		f := newFakeForm("plain_jobs", 1)
		f.plan.Described = Table{Attempt: "attempt"}
		c := NewConsumer(noDB(0), f, HandlerFunc(func(context.Context, *Delivery) outcome.Outcome { return outcome.Ack() }),
			&Config{Retry: tc.retry, PollInterval: 10 * time.Millisecond})
		if !tc.refuse {
			if err := runUntil(t, c, func() bool { return f.settledCount() == 1 }); err != nil {
				t.Fatalf("RetryAtOnce: %v", err)
			}
			continue
		}
		err := c.Run(context.Background())
		if !errors.Is(err, ErrSchema) || !strings.Contains(err.Error(), "plain_jobs") || !strings.Contains(err.Error(), "RetryAfter") || !strings.Contains(err.Error(), "inbox.RetryAtOnce") {
			t.Fatalf("policy %v on a table without retry_after: Run = %v, want ErrSchema naming the table, the column and RetryAtOnce", tc.retry, err)
		}
		if f.closed != 1 {
			t.Fatalf("the refused form was closed %d times, want once", f.closed)
		}
	}
}

func TestBackoffOfAFailedSettlement(t *testing.T) {
	c := resolving(lifecycle{Attempt: true, RetryAfter: true, DeadAt: true}, &Config{MaxAttempts: 5}, nil)
	refused := errors.New("violates foreign key constraint")
	o := c.backoff(&Delivery{ID: 1, Attempt: 2}, refused)
	if o.Kind() != outcome.KindRetryAfter || o.Delay() <= 0 || !errors.Is(o.Err(), refused) {
		t.Errorf("backoff = %v (err %v), want a retry after the policy's delay with the settlement's error", o, o.Err())
	}
	if o := c.backoff(&Delivery{ID: 1, Attempt: 5}, refused); o.Kind() != outcome.KindFail || !errors.Is(o.Err(), refused) {
		t.Errorf("backoff at the limit = %v (err %v), want a Fail", o, o.Err())
	}
}

// TestJSONBatchFunc: each row's error settles it as Func would, a row that does not decode never
// reaches the function, and a short slice leaves the rest without an outcome.
func TestJSONBatchFunc(t *testing.T) {
	type job struct{ N int }
	boom := errors.New("boom")
	var got []int
	h := JSONBatchFunc(func(ctx context.Context, ds []*Delivery, vs []job) []error {
		for _, v := range vs {
			got = append(got, v.N)
		}
		return []error{nil, Permanent(boom)}
	})
	ds := []*Delivery{{ID: 1, Payload: []byte(`{"N":1}`)}, {ID: 2, Payload: []byte(`not json`)}, {ID: 3, Payload: []byte(`{"N":3}`)}, {ID: 4, Payload: []byte(`{"N":4}`)}}
	outs := h.HandleBatch(context.Background(), ds)
	want := []outcome.Kind{outcome.KindAck, outcome.KindNone, outcome.KindFail, outcome.KindNone}
	if len(outs) != len(want) {
		t.Fatalf("%d outcomes, want %d", len(outs), len(want))
	}
	for i, k := range want {
		if outs[i].Kind() != k {
			t.Errorf("row %d: %v, want %v", ds[i].ID, outs[i], k)
		}
	}
	if ds[1].DecodeError() == nil || !slices.Equal(got, []int{1, 3, 4}) {
		t.Errorf("decoded %v, row 2's decode error %v; want rows 1, 3, 4 and an error for row 2", got, ds[1].DecodeError())
	}
	if !errors.Is(outs[2].Err(), boom) {
		t.Errorf("row 3's reason %v, want boom", outs[2].Err())
	}
}
