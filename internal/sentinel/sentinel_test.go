package sentinel

import (
	"errors"
	"io"
	"testing"
)

func TestErrorfText(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{Errorf(LeaseLost, Row("jobs", 7), "the lease ran out"), `inbox: lease lost: table "jobs", row 7: the lease ran out`},
		{Errorf(nil, Queue("jobs", "mail"), "no kind %q", "k"), `inbox: table "jobs", queue "mail": no kind "k"`},
		{Errorf(Schema, Column("jobs", "kind"), "not text"), `inbox: schema: table "jobs", column "kind": not text`},
		{Errorf(Closed, "", "closed"), `inbox: closed: closed`},
		{Errorf(Dialect, Table("jobs"), ""), `inbox: dialect: table "jobs"`},
		{Errorf(nil, Rows("jobs", []int64{1, 2}), "claiming: %w", io.EOF), `inbox: table "jobs", rows [1 2]: claiming: EOF`},
		// A wrapped error of the library keeps one prefix.
		{Errorf(nil, Table("jobs"), "opening: %w", Errorf(LeaseLost, "", "gone")), `inbox: table "jobs": opening: lease lost: gone`},
	} {
		if got := c.err.Error(); got != c.want {
			t.Errorf("got  %s\nwant %s", got, c.want)
		}
	}
}

func TestErrorfMatches(t *testing.T) {
	inner := Errorf(CommitUnknown, Table("jobs"), "commit: %w", io.ErrUnexpectedEOF)
	err := Errorf(LeaseLost, Row("jobs", 1), "settling: %w", inner)
	for _, target := range []error{LeaseLost, CommitUnknown, io.ErrUnexpectedEOF, inner} {
		if !errors.Is(err, target) {
			t.Errorf("errors.Is(%v, %v) = false", err, target)
		}
	}
	if errors.Is(err, Closed) {
		t.Errorf("errors.Is(%v, Closed) = true", err)
	}
	if errors.Is(Errorf(nil, "", "x"), LeaseLost) {
		t.Error("an error of no kind matches LeaseLost")
	}
	if BacksOff(err) {
		t.Error("BacksOff of a lease-lost error = true")
	}
}

func TestAt(t *testing.T) {
	inner := Errorf(ServerTooOld, "", "Postgres %s: upgrade", "9.4")
	err := At(Queue("jobs", "mail"), inner)
	if want := `inbox: server too old: table "jobs", queue "mail": Postgres 9.4: upgrade`; err.Error() != want {
		t.Errorf("got  %s\nwant %s", err, want)
	}
	if !errors.Is(err, ServerTooOld) {
		t.Errorf("errors.Is(%v, ServerTooOld) = false", err)
	}
	err = At(Table("jobs"), io.EOF)
	if want := `inbox: table "jobs": EOF`; err.Error() != want || !errors.Is(err, io.EOF) {
		t.Errorf("got %v, want %s matching io.EOF", err, want)
	}
	placed := Errorf(Schema, Table("a"), "x")
	if err := At(Table("b"), placed); err.Error() != `inbox: table "b": schema: table "a": x` || !errors.Is(err, Schema) {
		t.Errorf("At over an error with a where: %v", err)
	}
}
