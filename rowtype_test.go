package inbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sqlinbox/inbox/outcome"
)

// everyRole tags every role of Table and two own columns.
type everyRole struct {
	ID          int64               `inbox:"id,generated"`
	Body        json.RawMessage     `inbox:"payload,column=body"`
	Attempt     int                 `inbox:"attempt"`
	ProcessedAt *time.Time          `inbox:"processed_at"`
	Queue       string              `inbox:"queue,column=grp"`
	Kind        string              `inbox:"kind"`
	Priority    int32               `inbox:"priority"`
	RetryAfter  sql.NullTime        `inbox:"retry_after"`
	Headers     map[string]string   `inbox:"headers"`
	DeadAt      sql.Null[time.Time] `inbox:"dead_at"`
	LastError   sql.NullString      `inbox:"last_error"`
	CreatedAt   time.Time           `inbox:"created_at"`
	CancelledAt *time.Time          `inbox:"cancelled_at"`
	LockedUntil *time.Time          `inbox:"locked_until,column=lease_until"`
	Key         sql.NullString      `inbox:"unique_key,column=dedupe"`
	Group       string              `inbox:"group_key,column=customer"`
	Tenant      string              `inbox:"limit_key,column=tenant"`
	Customer    int64               `inbox:"column=customer_id"`
	Note        *string             `inbox:"column=note"`
	Ignored     string
	Skipped     string `inbox:"-"`
}

func TestTableOfEveryRole(t *testing.T) {
	got, err := TableOf[everyRole]("jobs")
	if err != nil {
		t.Fatal(err)
	}
	want := Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "body", Attempt: "attempt",
		ProcessedAt: "processed_at", Queue: "grp", Kind: "kind", Priority: "priority", RetryAfter: "retry_after",
		Headers: "headers", DeadAt: "dead_at", LastError: "last_error", CreatedAt: "created_at", CancelledAt: "cancelled_at",
		LockedUntil: "lease_until", UniqueKey: "dedupe", GroupKey: "customer", LimitKey: "tenant", Columns: []string{"customer_id", "note"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("TableOf[everyRole]:\n got %+v\nwant %+v", got, want)
	}
	// Every role of Table is one a tag names: a role added to Table without its tag fails here.
	var roles []string
	for _, r := range want.roles() {
		if *r.name == "" {
			t.Errorf("the test's table leaves role %s unnamed: tag it in everyRole", r.role)
		}
		roles = append(roles, r.role)
	}
	if len(tagRoles) != len(roles) {
		t.Errorf("%d tag roles for Table's %d roles: %v", len(tagRoles), len(roles), roles)
	}
	// Every default column is the role's tag.
	type defaults struct {
		ID    int64     `inbox:"id"`
		P     string    `inbox:"payload"`
		Lease time.Time `inbox:"locked_until"`
	}
	d, err := TableOf[defaults]("t")
	if err != nil || d.ID != "id" || d.Payload != "payload" || d.IDGenerated || d.LockedUntil != "locked_until" {
		t.Errorf("TableOf[defaults] = %+v, %v", d, err)
	}
}

// Embedded is promoted into a row type by value.
type Embedded struct {
	ID      int64  `inbox:"id"`
	Payload []byte `inbox:"payload"`
}

func TestTableOfEmbedded(t *testing.T) {
	type row struct {
		Embedded
		Account string `inbox:"column=account"`
	}
	got, err := TableOf[row]("jobs")
	want := Table{Name: "jobs", ID: "id", Payload: "payload", Columns: []string{"account"}}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("TableOf[row] = %+v, %v; want %+v", got, err, want)
	}
	r, err := RowOf[row](&Delivery{ID: 7, Payload: []byte("p"), ownTable: "jobs", ownNames: []string{"account"}, ownValues: []any{[]byte("acme")}})
	if err != nil || r.ID != 7 || string(r.Payload) != "p" || r.Account != "acme" {
		t.Errorf("RowOf[row] = %+v, %v", r, err)
	}
}

// TestTableOfRefuses: each tag TableOf cannot take fails it, wrapping ErrSchema, with one
// inbox: prefix, naming the field and its tag and saying what is wrong.
func TestTableOfRefuses(t *testing.T) {
	type unknownRole struct {
		ID int64  `inbox:"id"`
		P  []byte `inbox:"payloud"`
	}
	type twoPayloads struct {
		ID int64  `inbox:"id"`
		A  []byte `inbox:"payload"`
		B  string `inbox:"payload,column=b"`
	}
	type intPayload struct {
		ID int64 `inbox:"id"`
		P  int   `inbox:"payload"`
	}
	type stringID struct {
		ID string `inbox:"id"`
	}
	type intID struct {
		ID int `inbox:"id"`
	}
	type stringProcessed struct {
		ID int64  `inbox:"id"`
		At string `inbox:"processed_at"`
	}
	type intHeaders struct {
		ID int64          `inbox:"id"`
		H  map[string]int `inbox:"headers"`
	}
	type intQueue struct {
		ID int64 `inbox:"id"`
		Q  int   `inbox:"queue"`
	}
	type stringAttempt struct {
		ID int64  `inbox:"id"`
		N  string `inbox:"attempt"`
	}
	type noID struct {
		P []byte `inbox:"payload"`
	}
	type emptyColumn struct {
		ID int64  `inbox:"id"`
		P  []byte `inbox:"payload,column="`
	}
	type spacedColumn struct {
		ID int64  `inbox:"id"`
		C  string `inbox:"column= account"`
	}
	type nulColumn struct {
		ID int64  `inbox:"id"`
		C  string "inbox:\"column=a\x00b\""
	}
	type unexported struct {
		ID int64  `inbox:"id"`
		p  []byte `inbox:"payload"`
	}
	type generatedPayload struct {
		ID int64  `inbox:"id"`
		P  []byte `inbox:"payload,generated"`
	}
	type twoRoles struct {
		ID int64  `inbox:"id"`
		Q  string `inbox:"queue,kind"`
	}
	type sameColumn struct {
		ID int64  `inbox:"id"`
		Q  string `inbox:"queue"`
		A  string `inbox:"column=queue"`
	}
	type leaseOnID struct {
		ID int64     `inbox:"id"`
		L  time.Time `inbox:"locked_until,column=id"`
	}
	type columnTwice struct {
		ID int64  `inbox:"id"`
		A  string `inbox:"column=a,column=b"`
	}
	type emptyTag struct {
		ID int64  `inbox:"id"`
		A  string `inbox:""`
	}
	type Inner struct {
		P []byte `inbox:"payload"`
	}
	type throughPointer struct {
		ID int64 `inbox:"id"`
		*Inner
	}
	_ = unexported{}.p
	for _, tc := range []struct {
		name string
		of   func() error
		want []string
	}{
		{"unknown role", of[unknownRole], []string{"field P", `inbox:"payloud"`, `unknown role "payloud"`}},
		{"duplicate role", of[twoPayloads], []string{"field B", `inbox:"payload,column=b"`, "role payload is tagged on field A already"}},
		{"payload of int", of[intPayload], []string{"field P", "role payload needs a field of type []byte, json.RawMessage or string, not int"}},
		{"id of string", of[stringID], []string{"field ID", "role id needs a field of type int64, not string"}},
		{"id of int", of[intID], []string{"field ID", "role id needs a field of type int64, not int"}},
		{"processed_at of string", of[stringProcessed], []string{"field At", "role processed_at needs a field of type time.Time"}},
		{"headers of map[string]int", of[intHeaders], []string{"field H", "needs a field of type map[string]string"}},
		{"queue of int", of[intQueue], []string{"field Q", "role queue needs a field of type string, not int"}},
		{"attempt of string", of[stringAttempt], []string{"field N", "role attempt needs a field of type an integer"}},
		{"no id", of[noID], []string{"tags no field", `inbox:"id"`}},
		{"empty column", of[emptyColumn], []string{"field P", `inbox:"payload,column="`, "column= names no column"}},
		{"spaced column", of[spacedColumn], []string{"field C", `column " account" begins or ends with a space`}},
		{"NUL in column", of[nulColumn], []string{"field C", "NUL byte"}},
		{"unexported", of[unexported], []string{"field p", "unexported"}},
		{"generated payload", of[generatedPayload], []string{"field P", "generated is for the id alone"}},
		{"two roles", of[twoRoles], []string{"field Q", "roles queue and kind on one field"}},
		{"one column twice", of[sameColumn], []string{"field A", `column "queue" is field Q's already`}},
		{"lease on the id's column", of[leaseOnID], []string{"field L", `column "id" is field ID's already`}},
		{"column= twice", of[columnTwice], []string{"field A", "column= is given twice"}},
		{"empty tag", of[emptyTag], []string{"field A", "an empty item"}},
		{"through a pointer", of[throughPointer], []string{"field P", "embedded pointer"}},
		{"not a struct", of[int], []string{"row type int is not a struct"}},
		{"no name", func() error { _, err := TableOf[Embedded](""); return err }, []string{"TableOf[inbox.Embedded] is given no table name"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.of()
			if err == nil {
				t.Fatal("no error")
			}
			if !errors.Is(err, ErrSchema) {
				t.Errorf("%v does not wrap ErrSchema", err)
			}
			if msg := err.Error(); !strings.HasPrefix(msg, "inbox: ") || strings.Count(msg, "inbox: ") != 1 {
				t.Errorf("%q: want one inbox: prefix", msg)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
		})
	}
}

// of is TableOf[R]'s error, where RowOf refuses R with the same error.
func of[R any]() error {
	_, err := TableOf[R]("jobs")
	_, rerr := RowOf[R](&Delivery{})
	if err == nil || rerr == nil || rerr.Error() != err.Error() {
		return fmt.Errorf("TableOf and RowOf differ: %v; %v", err, rerr)
	}
	return err
}

// TestRowOf: RowOf fills the roles a Delivery carries and the own columns as Column reads them.
func TestRowOf(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC)
	d := &Delivery{ID: 42, Payload: []byte(`{"n":1}`), Attempt: 3, Queue: "eu", Kind: "invoice",
		Headers: map[string]string{"trace": "t1"}, ownTable: "jobs", ownNames: []string{"customer_id", "note"},
		ownValues: []any{[]byte("1234"), nil}}
	r, err := RowOf[everyRole](d)
	if err != nil {
		t.Fatal(err)
	}
	want := everyRole{ID: 42, Body: json.RawMessage(`{"n":1}`), Attempt: 3, Queue: "eu", Kind: "invoice",
		Headers: map[string]string{"trace": "t1"}, Customer: 1234}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("RowOf:\n got %+v\nwant %+v", r, want)
	}
	d.ownValues = []any{int64(5), "hello"}
	if r, err = RowOf[everyRole](d); err != nil || r.Customer != 5 || r.Note == nil || *r.Note != "hello" {
		t.Errorf("RowOf = %+v, %v; want customer 5, note hello", r, err)
	}

	// Each own column's field reads the value as Column reads it into the field's type.
	type own struct {
		ID    int64           `inbox:"id"`
		S     string          `inbox:"column=s"`
		B     []byte          `inbox:"column=b"`
		I     int32           `inbox:"column=i"`
		U     uint16          `inbox:"column=u"`
		F     float64         `inbox:"column=f"`
		OK    bool            `inbox:"column=ok"`
		T     time.Time       `inbox:"column=t"`
		PT    *time.Time      `inbox:"column=pt"`
		NS    sql.NullString  `inbox:"column=ns"`
		NI    sql.Null[int64] `inbox:"column=ni"`
		PNS   *sql.NullString `inbox:"column=pns"`
		Any   any             `inbox:"column=any"`
		Raw   json.RawMessage `inbox:"column=raw"`
		Named customerID      `inbox:"column=named"`
	}
	names := []string{"s", "b", "i", "u", "f", "ok", "t", "pt", "ns", "ni", "pns", "any", "raw", "named"}
	values := []any{int64(12), "text", []byte("-7"), "65535", []byte("2.5"), int64(1), at, at, []byte("n"), nil, "x", int64(9), []byte(`[1]`), "77"}
	od := &Delivery{ID: 1, ownTable: "jobs", ownNames: names, ownValues: values}
	o, err := RowOf[own](od)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got any, want any) {
		t.Helper()
		if !reflect.DeepEqual(got, want) {
			t.Errorf("column %s: RowOf reads %#v, Column reads %#v", name, got, want)
		}
	}
	check("s", o.S, mustColumn[string](t, od, "s"))
	check("b", o.B, mustColumn[[]byte](t, od, "b"))
	check("i", o.I, mustColumn[int32](t, od, "i"))
	check("u", o.U, mustColumn[uint16](t, od, "u"))
	check("f", o.F, mustColumn[float64](t, od, "f"))
	check("ok", o.OK, mustColumn[bool](t, od, "ok"))
	check("t", o.T, mustColumn[time.Time](t, od, "t"))
	check("pt", o.PT, mustColumn[*time.Time](t, od, "pt"))
	check("ns", o.NS, mustColumn[sql.NullString](t, od, "ns"))
	check("ni", o.NI, mustColumn[sql.Null[int64]](t, od, "ni"))
	check("pns", o.PNS, mustColumn[*sql.NullString](t, od, "pns"))
	check("any", o.Any, mustColumn[any](t, od, "any"))
	check("raw", o.Raw, mustColumn[json.RawMessage](t, od, "raw"))
	check("named", o.Named, mustColumn[customerID](t, od, "named"))
	// And what it reads is the value itself, converted.
	for _, c := range []struct {
		name      string
		got, want any
	}{
		{"s", o.S, "12"}, {"b", o.B, []byte("text")}, {"i", o.I, int32(-7)}, {"u", o.U, uint16(65535)},
		{"f", o.F, 2.5}, {"ok", o.OK, true}, {"t", o.T, at}, {"pt", o.PT, &at},
		{"ns", o.NS, sql.NullString{String: "n", Valid: true}}, {"ni", o.NI, sql.Null[int64]{}},
		{"pns", o.PNS, &sql.NullString{String: "x", Valid: true}}, {"any", o.Any, int64(9)},
		{"raw", o.Raw, json.RawMessage(`[1]`)}, {"named", o.Named, customerID(77)},
	} {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("column %s: RowOf reads %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

type customerID int64

func mustColumn[T any](t *testing.T, d *Delivery, name string) T {
	t.Helper()
	v, err := Column[T](d, name)
	if err != nil {
		t.Fatalf("Column %s: %v", name, err)
	}
	return v
}

// TestRowOfRefuses: a row that does not read into R fails naming the row, the field and the
// column, as Column fails on the same value.
func TestRowOfRefuses(t *testing.T) {
	type row struct {
		ID int64 `inbox:"id"`
		N  int8  `inbox:"column=n"`
	}
	for _, tc := range []struct {
		name string
		d    *Delivery
		want string
	}{
		{"not read", &Delivery{ID: 3, ownTable: "jobs", ownNames: []string{"other"}, ownValues: []any{1}}, "not read with the row"},
		{"no columns read", &Delivery{ID: 3}, "not read with the row"},
		{"not a number", &Delivery{ID: 3, ownTable: "jobs", ownNames: []string{"n"}, ownValues: []any{"abc"}}, `converting "abc" to int8`},
		{"overflow", &Delivery{ID: 3, ownTable: "jobs", ownNames: []string{"n"}, ownValues: []any{int64(300)}}, "out of range"},
		{"a time into a number", &Delivery{ID: 3, ownTable: "jobs", ownNames: []string{"n"}, ownValues: []any{time.Now()}}, "unsupported conversion of time.Time into int8"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := RowOf[row](tc.d)
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range []string{"inbox: row 3, field N of inbox.row", `(column "n")`, tc.want} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%v\ndoes not say %q", err, w)
				}
			}
			if len(tc.d.ownNames) == 1 && tc.d.ownNames[0] == "n" {
				if _, cerr := Column[int8](tc.d, "n"); cerr == nil {
					t.Errorf("Column reads what RowOf refuses (%v)", err)
				}
			}
		})
	}
	if _, err := RowOf[int](&Delivery{}); !errors.Is(err, ErrSchema) {
		t.Errorf("RowOf[int]: %v, want ErrSchema", err)
	}
}

// TestRowFunc: the handler receives the typed row, and a row that does not read never reaches
// it, marked undecodable.
func TestRowFunc(t *testing.T) {
	type row struct {
		ID      int64  `inbox:"id"`
		Payload string `inbox:"payload"`
		N       int    `inbox:"column=n"`
	}
	var got []row
	h := RowFunc(func(_ context.Context, _ *Delivery, r row) error {
		got = append(got, r)
		if r.N < 0 {
			return errors.New("negative")
		}
		return nil
	})
	good := &Delivery{ID: 1, Payload: []byte("p"), ownTable: "jobs", ownNames: []string{"n"}, ownValues: []any{int64(2)}}
	if o := h.Handle(context.Background(), good); o.Kind() != outcome.KindAck {
		t.Errorf("outcome %v, want Ack", o)
	}
	if len(got) != 1 || got[0] != (row{ID: 1, Payload: "p", N: 2}) {
		t.Errorf("handler got %+v", got)
	}
	failing := &Delivery{ID: 2, ownTable: "jobs", ownNames: []string{"n"}, ownValues: []any{int64(-1)}}
	if o := h.Handle(context.Background(), failing); o.Kind() != outcome.KindRetry {
		t.Errorf("outcome %v, want Retry", o)
	}
	bad := &Delivery{ID: 3, ownTable: "jobs", ownNames: []string{"n"}, ownValues: []any{"x"}}
	h.Handle(context.Background(), bad)
	if len(got) != 2 || bad.decodeErr == nil || !strings.Contains(bad.decodeErr.Error(), "field N") {
		t.Errorf("an unreadable row: handler calls %d (want 2), decode error %v", len(got), bad.decodeErr)
	}
	defer func() {
		if recover() == nil {
			t.Error("RowFunc(nil) does not panic")
		}
	}()
	RowFunc[row](nil)
}
