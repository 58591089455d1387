package inboxtest_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/inboxtest"
	"github.com/sqlinbox/inbox/outcome"
)

// sms is a kind of job with options of its own: three attempts, each retry seven seconds later
// times the attempt.
type sms struct {
	To string `json:"to"`
}

func (sms) Kind() string { return "sms" }

func (sms) KindOptions() inbox.KindOptions {
	return inbox.KindOptions{MaxAttempts: 3, Retry: linear(7 * time.Second)}
}

// linear waits step times the attempt.
type linear time.Duration

func (l linear) Delay(attempt int) time.Duration { return time.Duration(l) * time.Duration(attempt) }

// fax is a kind of job without options: the Config's apply.
type fax struct{}

func (fax) Kind() string { return "fax" }

var errUnreachable = errors.New("unreachable")

// sendSMS fails every send to "nobody", and sends the others.
func sendSMS(_ context.Context, _ *inbox.Delivery, m sms) error {
	if m.To == "nobody" {
		return errUnreachable
	}
	return nil
}

// typedJobs is a consumer of jobs by kind: the table has a Kind column, and the Config an attempt
// limit of 10 and a retry policy of a minute, which the kinds without options take.
var typedJobs = inboxtest.Consumer{
	Table: inbox.Table{Name: "jobs", ID: "id", Payload: "payload", Kind: "kind", Attempt: "attempt",
		RetryAfter: "retry_after", DeadAt: "dead_at"},
	Config: &inbox.Config{MaxAttempts: 10, Retry: linear(time.Minute)},
}

// TestHandleJobAppliesTheKindsOptions: a job of a kind with MaxAttempts 3 that fails at attempt
// 3 dies, and at attempt 2 retries after its kind's policy's delay, not the Config's.
func TestHandleJobAppliesTheKindsOptions(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		args    sms
		attempt int
		want    outcome.Kind
		delay   time.Duration
	}{
		{"sent", sms{To: "ada"}, 3, outcome.KindAck, 0},
		{"retried by the kind's policy", sms{To: "nobody"}, 2, outcome.KindRetryAfter, 14 * time.Second},
		{"dead at the kind's limit", sms{To: "nobody"}, 3, outcome.KindFail, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := inboxtest.HandleJob(ctx, typedJobs, sendSMS, tc.args, tc.attempt)
			if r.Outcome.Kind() != tc.want || r.Outcome.Delay() != tc.delay {
				t.Fatalf("outcome %v after %v, want %v after %v", r.Outcome, r.Outcome.Delay(), tc.want, tc.delay)
			}
			if tc.want == outcome.KindFail && (!errors.Is(r.Outcome.Err(), errUnreachable) || !strings.Contains(r.Outcome.Err().Error(), "attempt 3 of 3")) {
				t.Errorf("the dead row's error %v, want the handler's, at attempt 3 of 3", r.Outcome.Err())
			}
		})
	}
}

// TestHandleRunsKindsByTheirOwnOptions: a *Kinds handed to Handle runs each delivery by its
// kind's handler and options; a kind without options takes the Config's.
func TestHandleRunsKindsByTheirOwnOptions(t *testing.T) {
	ctx := context.Background()
	var kinds inbox.Kinds
	inbox.Handle(&kinds, sendSMS)
	inbox.Handle(&kinds, func(context.Context, *inbox.Delivery, fax) error { return errors.New("busy") })

	if r := typedJobs.Handle(ctx, &kinds, inboxtest.JobDelivery(sms{To: "nobody"}, 3)); r.Outcome.Kind() != outcome.KindFail {
		t.Errorf("sms at attempt 3 of its 3: %v, want fail", r.Outcome)
	}
	r := typedJobs.Handle(ctx, &kinds, inboxtest.JobDelivery(fax{}, 3))
	if r.Outcome.Kind() != outcome.KindRetryAfter || r.Outcome.Delay() != 3*time.Minute {
		t.Errorf("fax at attempt 3 of the Config's 10: %v after %v, want retry_after after 3m0s (the Config's policy)", r.Outcome, r.Outcome.Delay())
	}
	if r := typedJobs.Handle(ctx, &kinds, inboxtest.JobDelivery(fax{}, 10)); r.Outcome.Kind() != outcome.KindFail {
		t.Errorf("fax at attempt 10 of the Config's 10: %v, want fail", r.Outcome)
	}
	bad := inboxtest.Delivery([]byte("{not json"), 1)
	bad.Kind = "sms"
	if r := typedJobs.Handle(ctx, &kinds, bad); r.Outcome.Kind() != outcome.KindFail {
		t.Errorf("sms whose arguments do not decode: %v, want fail", r.Outcome)
	}
}

// TestHandleRefusesKindsWithoutAKindColumn: a consumer of kinds on a table without a Kind
// column would not run, and Handle says so.
func TestHandleRefusesKindsWithoutAKindColumn(t *testing.T) {
	c := typedJobs
	c.Table.Kind = ""
	defer func() {
		if p := recover(); p == nil || !strings.Contains(p.(string), "Kind column") {
			t.Errorf("panic %v, want one naming the missing Kind column", p)
		}
	}()
	inboxtest.HandleJob(context.Background(), c, sendSMS, sms{}, 1)
}

// TestHandleJobAgreesWithTheConsumer: for a kind with options of its own and one without, at
// attempts below, at and past each limit, inboxtest reports the outcome a consumer of the same
// kinds, table and Config settles the row by.
func TestHandleJobAgreesWithTheConsumer(t *testing.T) {
	ctx := context.Background()
	var kinds inbox.Kinds
	inbox.Handle(&kinds, sendSMS)
	inbox.Handle(&kinds, func(context.Context, *inbox.Delivery, fax) error { return errors.New("busy") })
	for _, attempt := range []int{1, 2, 3, 4, 9, 10, 11} {
		for _, d := range []func() *inbox.Delivery{
			func() *inbox.Delivery { return inboxtest.JobDelivery(sms{To: "nobody"}, attempt) },
			func() *inbox.Delivery { return inboxtest.JobDelivery(sms{To: "ada"}, attempt) },
			func() *inbox.Delivery { return inboxtest.JobDelivery(fax{}, attempt) },
		} {
			want := consumerApplies(t, typedJobs.Table, *typedJobs.Config, &kinds, d())
			got := typedJobs.Handle(ctx, &kinds, d()).Outcome
			if !sameOutcome(got, want) {
				t.Errorf("kind %s, attempt %d: inboxtest reports %v after %v (%v), the consumer settles by %v after %v (%v)",
					d().Kind, attempt, got, got.Delay(), got.Err(), want, want.Delay(), want.Err())
			}
		}
	}
}
