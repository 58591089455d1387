package outcome_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/outcome"
)

func TestOutcomes(t *testing.T) {
	for _, tt := range []struct {
		o       outcome.Outcome
		kind    outcome.Kind
		delay   time.Duration
		settles bool
		str     string
	}{
		{outcome.Outcome{}, outcome.KindNone, 0, false, "none"},
		{outcome.Ack(), outcome.KindAck, 0, true, "ack"},
		{outcome.Drop(), outcome.KindDrop, 0, true, "drop"},
		{outcome.Retry(), outcome.KindRetry, 0, false, "retry"},
		{outcome.Cancel(), outcome.KindCancel, 0, true, "cancel"},
		{outcome.RetryAfter(90 * time.Second), outcome.KindRetryAfter, 90 * time.Second, false, "retry after 1m30s"},
		{outcome.RetryAfter(0), outcome.KindRetryAfter, 0, false, "retry after 0s"},
		// A negative delay is no delay, never a row due in the past.
		{outcome.RetryAfter(-time.Hour), outcome.KindRetryAfter, 0, false, "retry after 0s"},
	} {
		if got := tt.o.Kind(); got != tt.kind {
			t.Errorf("%v: Kind() = %v, want %v", tt.o, got, tt.kind)
		}
		if got := tt.o.Delay(); got != tt.delay {
			t.Errorf("%v: Delay() = %v, want %v", tt.o, got, tt.delay)
		}
		if got := tt.o.Settles(); got != tt.settles {
			t.Errorf("%v: Settles() = %v, want %v", tt.o, got, tt.settles)
		}
		if got := tt.o.String(); got != tt.str {
			t.Errorf("String() = %q, want %q", got, tt.str)
		}
	}
}

func TestKindString(t *testing.T) {
	for k, want := range map[outcome.Kind]string{
		outcome.KindNone: "none", outcome.KindAck: "ack", outcome.KindDrop: "drop",
		outcome.KindRetry: "retry", outcome.KindRetryAfter: "retry after", outcome.Kind(42): "Kind(42)",
	} {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", uint8(k), got, want)
		}
	}
}

func TestFailAndErrors(t *testing.T) {
	boom := errors.New("boom")
	if o := outcome.Fail(boom); o.Kind() != outcome.KindFail || o.Err() != boom || o.Settles() || o.String() != "fail" {
		t.Errorf("Fail(boom) = %v, err %v", o, o.Err())
	}
	o := outcome.RetryAfter(time.Second).WithError(boom)
	if o.Kind() != outcome.KindRetryAfter || o.Delay() != time.Second || o.Err() != boom {
		t.Errorf("RetryAfter(1s).WithError(boom) = %v, err %v", o, o.Err())
	}
	if got := outcome.Retry().LastError(); got != nil {
		t.Errorf("LastError of an outcome without an error = %v, want nil (NULL)", got)
	}
	if got := o.LastError(); got != "boom" {
		t.Errorf("LastError = %v, want boom", got)
	}
	long := strings.Repeat("é", outcome.LastErrorMax) // 2 bytes each
	got := outcome.Fail(errors.New("x" + long)).LastError().(string)
	if len(got) > outcome.LastErrorMax || !utf8.ValidString(got) || len(got) < outcome.LastErrorMax-1 {
		t.Errorf("LastError of a long error: %d bytes, valid UTF-8 %v; want at most %d, cut on a rune", len(got), utf8.ValidString(got), outcome.LastErrorMax)
	}
}
