package inbox

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/sqlinbox/inbox/outcome"
)

// TableOf returns the description of the table named name that the struct tags of the row type
// R give, the same Table a description written by hand with the same columns is: publishing,
// claiming and settling build the same statements from either. It fails at once, wrapping
// ErrSchema and naming R's field and its tag, on a tag it cannot take: an unknown role, a role
// tagged twice, a role on a field of a Go type that cannot hold it, an invalid column name, an
// unexported tagged field, no id; and on a description Table.Validate refuses.
//
// A field's tag `inbox:"ROLE[,column=NAME][,generated]"` gives it a role of the table; the
// column is the role's name unless column= names another. The roles, with the Go types their fields may be:
//
//	id            int64; ",generated" where the database assigns it (Table.IDGenerated)
//	payload       []byte, json.RawMessage or string
//	attempt       an integer
//	priority      an integer
//	queue, kind   string
//	headers       map[string]string
//	last_error    string, *string, sql.NullString or sql.Null[string]
//	unique_key    string, *string, sql.NullString or sql.Null[string] (Table.UniqueKey)
//	group_key     string, *string, sql.NullString or sql.Null[string] (Table.GroupKey)
//	limit_key     string, *string, sql.NullString or sql.Null[string] (Table.LimitKey)
//	processed_at, retry_after, dead_at, created_at, locked_until
//	              time.Time, *time.Time, sql.NullTime or sql.Null[time.Time]
//
// A field tagged `inbox:"column=NAME"` alone, with no role, is one of the application's own columns
// (Table.Columns), of any type the driver scans, in the order of R's fields. Fields without an
// inbox tag, or tagged "-", are not columns of the table. Table.Notify is the caller's to set.
func TableOf[R any](name string) (Table, error) {
	rt, err := rowTypeOf[R]()
	if err != nil {
		return Table{}, err
	}
	if name == "" {
		return Table{}, fmt.Errorf("%w: TableOf[%s] is given no table name: name the table", ErrSchema, rt.typ)
	}
	t := rt.table
	t.Name = name
	t.Columns = append([]string(nil), rt.table.Columns...)
	if err := t.Validate(); err != nil {
		return Table{}, fmt.Errorf("%w (row type %s)", err, rt.typ)
	}
	return t, nil
}

// RowOf returns d's row as an R, R's tagged fields filled from d: the id, payload, attempt,
// queue, kind and headers from d's, and each own column from the value d's claim read
// (converted as Column converts it; a NULL leaves the field zero). The roles a Delivery does not
// carry (processed_at, retry_after, dead_at, last_error, created_at, priority, locked_until,
// unique_key, group_key) are left
// zero. The payload shares d.Payload's bytes, valid as long as d is. It fails as TableOf does on
// R's tags, and naming the field and the column where d's claim did not read an own column of R
// (the consumer's table does not name it in Columns) or its value does not convert.
func RowOf[R any](d *Delivery) (R, error) {
	var r R
	rt, err := rowTypeOf[R]()
	if err != nil {
		return r, err
	}
	v := reflect.ValueOf(&r).Elem()
	for _, f := range rt.fields {
		if err := f.fill(v.FieldByIndex(f.index), d); err != nil {
			return r, fmt.Errorf("inbox: row %d, field %s of %s (column %q): %w", d.ID, f.name, rt.typ, f.column, err)
		}
	}
	return r, nil
}

// RowFunc adapts a function of a typed row to Handler: each delivery is read into an R by RowOf
// before f is called, and f's error is the outcome as Func settles it. A row that does not read
// into an R never reaches f; the consumer settles it by Config.UndecodablePayload and logs it.
// It panics when f is nil.
func RowFunc[R any](f func(ctx context.Context, d *Delivery, row R) error) Handler {
	mustAdapt("RowFunc", f == nil)
	return HandlerFunc(func(ctx context.Context, d *Delivery) outcome.Outcome {
		row, err := RowOf[R](d)
		if err != nil {
			d.Undecodable(err)
			return outcome.Outcome{}
		}
		return Result(f(ctx, d, row))
	})
}

// rowType is what a row type's tags say, read once per type.
type rowType struct {
	typ    reflect.Type
	table  Table // Name left empty
	fields []rowField
}

// rowField is one tagged field of a row type.
type rowField struct {
	name   string // the Go field's name
	index  []int
	column string
	role   string // the tag's role; "" for an own column

	generated bool // the id's option generated
}

// tagRole is one role a field's tag may name: the Table field it sets, the Go types its field
// may be, and the default column.
type tagRole struct {
	set    func(t *Table, column string)
	fits   func(reflect.Type) bool
	types  string // fits, said in an error
	column string
}

var (
	timeType = reflect.TypeFor[time.Time]()

	isInt64  = func(t reflect.Type) bool { return t.Kind() == reflect.Int64 }
	isString = func(t reflect.Type) bool { return t.Kind() == reflect.String }
	isInt    = func(t reflect.Type) bool { return t.Kind() >= reflect.Int && t.Kind() <= reflect.Int64 }
	isBytes  = func(t reflect.Type) bool {
		return t.Kind() == reflect.String || t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8
	}
	isHeaders = func(t reflect.Type) bool {
		return t.Kind() == reflect.Map && t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String
	}
	isTime = func(t reflect.Type) bool {
		return t == timeType || t == reflect.PointerTo(timeType) || t == reflect.TypeFor[sql.NullTime]() || t == reflect.TypeFor[sql.Null[time.Time]]()
	}
	isText = func(t reflect.Type) bool {
		return t.Kind() == reflect.String || t == reflect.TypeFor[*string]() || t == reflect.TypeFor[sql.NullString]() || t == reflect.TypeFor[sql.Null[string]]()
	}
)

const timeTypes = "time.Time, *time.Time, sql.NullTime or sql.Null[time.Time]"

// tagRoles are the roles by their tag, one for each role of Table.
var tagRoles = map[string]tagRole{
	"id":           {func(t *Table, c string) { t.ID = c }, isInt64, "int64", "id"},
	"payload":      {func(t *Table, c string) { t.Payload = c }, isBytes, "[]byte, json.RawMessage or string", "payload"},
	"attempt":      {func(t *Table, c string) { t.Attempt = c }, isInt, "an integer (int)", "attempt"},
	"processed_at": {func(t *Table, c string) { t.ProcessedAt = c }, isTime, timeTypes, "processed_at"},
	"queue":        {func(t *Table, c string) { t.Queue = c }, isString, "string", "queue"},
	"kind":         {func(t *Table, c string) { t.Kind = c }, isString, "string", "kind"},
	"priority":     {func(t *Table, c string) { t.Priority = c }, isInt, "an integer (int)", "priority"},
	"retry_after":  {func(t *Table, c string) { t.RetryAfter = c }, isTime, timeTypes, "retry_after"},
	"headers":      {func(t *Table, c string) { t.Headers = c }, isHeaders, "map[string]string", "headers"},
	"dead_at":      {func(t *Table, c string) { t.DeadAt = c }, isTime, timeTypes, "dead_at"},
	"last_error":   {func(t *Table, c string) { t.LastError = c }, isText, "string, *string, sql.NullString or sql.Null[string]", "last_error"},
	"created_at":   {func(t *Table, c string) { t.CreatedAt = c }, isTime, timeTypes, "created_at"},
	"cancelled_at": {func(t *Table, c string) { t.CancelledAt = c }, isTime, timeTypes, "cancelled_at"},
	"locked_until": {func(t *Table, c string) { t.LockedUntil = c }, isTime, timeTypes, "locked_until"},
	"unique_key":   {func(t *Table, c string) { t.UniqueKey = c }, isText, "string, *string, sql.NullString or sql.Null[string]", "unique_key"},
	"group_key":    {func(t *Table, c string) { t.GroupKey = c }, isText, "string, *string, sql.NullString or sql.Null[string]", "group_key"},
	"limit_key":    {func(t *Table, c string) { t.LimitKey = c }, isText, "string, *string, sql.NullString or sql.Null[string]", "limit_key"},
}

// tagRoleNames lists the roles' tags, for errors.
const tagRoleNames = "id, payload, attempt, processed_at, queue, kind, priority, retry_after, headers, dead_at, last_error, created_at, cancelled_at, locked_until, unique_key, group_key"

var rowTypes sync.Map // reflect.Type → *rowTypeResult

type rowTypeResult struct {
	rt  *rowType
	err error
}

// rowTypeOf reads R's tags, once per type: RowOf runs for every delivery.
func rowTypeOf[R any]() (*rowType, error) {
	typ := reflect.TypeFor[R]()
	if r, ok := rowTypes.Load(typ); ok {
		res := r.(*rowTypeResult)
		return res.rt, res.err
	}
	rt, err := parseRowType(typ)
	rowTypes.Store(typ, &rowTypeResult{rt, err})
	return rt, err
}

func parseRowType(typ reflect.Type) (*rowType, error) {
	if typ.Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: row type %s is not a struct: describe the table by a struct's fields, tagged `inbox:\"role\"`", ErrSchema, typ)
	}
	rt := &rowType{typ: typ}
	byRole := map[string]string{}   // role → the field that has it
	byColumn := map[string]string{} // column → the field that has it
	for _, sf := range reflect.VisibleFields(typ) {
		tag, ok := sf.Tag.Lookup("inbox")
		if !ok || tag == "-" {
			continue
		}
		f, err := parseField(typ, sf, tag)
		if err != nil {
			return nil, fmt.Errorf("%w: row type %s, field %s, tag `inbox:%q`: %v", ErrSchema, typ, sf.Name, tag, err)
		}
		if other, ok := byColumn[f.column]; ok {
			return nil, fmt.Errorf("%w: row type %s, field %s, tag `inbox:%q`: column %q is field %s's already: give each field its own column", ErrSchema, typ, sf.Name, tag, f.column, other)
		}
		byColumn[f.column] = sf.Name
		if f.role == "" {
			rt.table.Columns = append(rt.table.Columns, f.column)
		} else {
			if other, ok := byRole[f.role]; ok {
				return nil, fmt.Errorf("%w: row type %s, field %s, tag `inbox:%q`: role %s is tagged on field %s already: tag each role on one field", ErrSchema, typ, sf.Name, tag, f.role, other)
			}
			byRole[f.role] = sf.Name
			tagRoles[f.role].set(&rt.table, f.column)
			if f.role == "id" {
				rt.table.IDGenerated = f.generated
			}
		}
		rt.fields = append(rt.fields, f)
	}
	if rt.table.ID == "" {
		return nil, fmt.Errorf("%w: row type %s tags no field `inbox:\"id\"`: tag its int64 id field so", ErrSchema, typ)
	}
	return rt, nil
}

// parseField reads one field's tag: its items, apart by commas, are at most one role, column=NAME
// and, on the id, generated. Its errors say what is wrong with the tag; the caller says where.
func parseField(typ reflect.Type, sf reflect.StructField, tag string) (rowField, error) {
	f := rowField{name: sf.Name, index: sf.Index}
	if !sf.IsExported() {
		return f, fmt.Errorf("the field is unexported, so RowOf cannot fill it: export it")
	}
	for i := 1; i < len(sf.Index); i++ {
		if typ.FieldByIndex(sf.Index[:i]).Type.Kind() == reflect.Pointer {
			return f, fmt.Errorf("the field is promoted through an embedded pointer, which RowOf cannot fill: embed the struct by value")
		}
	}
	named := false
	for _, p := range strings.Split(tag, ",") {
		switch col, isCol := strings.CutPrefix(p, "column="); {
		case isCol && named:
			return f, fmt.Errorf("column= is given twice: give it once")
		case isCol:
			if err := validColumn(col); err != nil {
				return f, err
			}
			f.column, named = col, true
		case p == "generated":
			f.generated = true
		case f.role != "":
			return f, fmt.Errorf("roles %s and %s on one field: a field plays one role", f.role, p)
		case p == "":
			return f, fmt.Errorf("an empty item: write the role, column=NAME and generated apart by single commas")
		default:
			f.role = p
		}
	}
	if f.generated && f.role != "id" {
		return f, fmt.Errorf("generated is for the id alone: remove it")
	}
	if f.role == "" {
		if !named {
			return f, fmt.Errorf("no role and no column: tag a role (%s), or an own column `inbox:\"column=NAME\"`", tagRoleNames)
		}
		return f, nil
	}
	r, ok := tagRoles[f.role]
	if !ok {
		return f, fmt.Errorf("unknown role %q: the roles are %s, and an own column is tagged `inbox:\"column=NAME\"`", f.role, tagRoleNames)
	}
	if !r.fits(sf.Type) {
		return f, fmt.Errorf("role %s needs a field of type %s, not %s: change the field's type", f.role, r.types, sf.Type)
	}
	if !named {
		f.column = r.column
	}
	return f, nil
}

// validColumn refuses a column name no database keeps; the dialect checks the rest (its length)
// when a form or a publish quotes it.
func validColumn(c string) error {
	switch {
	case c == "":
		return fmt.Errorf("column= names no column: name it, or leave column= out")
	case strings.ContainsRune(c, 0) || !utf8.ValidString(c):
		return fmt.Errorf("column %q holds a NUL byte or invalid UTF-8: name a column the database can keep", c)
	case strings.TrimSpace(c) != c:
		return fmt.Errorf("column %q begins or ends with a space: remove it", c)
	}
	return nil
}

// fill sets v, the field f of a row, from d.
func (f rowField) fill(v reflect.Value, d *Delivery) error {
	switch f.role {
	case "id":
		v.SetInt(d.ID)
	case "payload":
		if v.Kind() == reflect.String {
			v.SetString(string(d.Payload))
		} else if d.Payload != nil {
			v.Set(reflect.ValueOf(d.Payload).Convert(v.Type()))
		}
	case "attempt":
		return setInt(v, strconv.Itoa(d.Attempt))
	case "queue":
		v.SetString(d.Queue)
	case "kind":
		v.SetString(d.Kind)
	case "headers":
		if d.Headers != nil {
			v.Set(reflect.ValueOf(d.Headers).Convert(v.Type()))
		}
	case "":
		return f.fillOwn(v, d)
	}
	return nil
}

// fillOwn sets v from the own column f names, as d's claim read it.
func (f rowField) fillOwn(v reflect.Value, d *Delivery) error {
	for i, n := range d.ownNames {
		if n == f.column {
			return assign(v, d.ownValues[i])
		}
	}
	return fmt.Errorf("the column is not read with the row: name it in the consumer's inbox.Table.Columns (describe the table with TableOf)")
}

// assign sets v from src, a value a driver scanned, converting as Rows.Scan converts src into
// a *T for the types a row's field is: a NULL leaves v zero (a nil pointer), an sql.Scanner
// scans src itself, and text, numbers and booleans convert between each other where their
// value allows.
func assign(v reflect.Value, src any) error {
	if s, ok := v.Addr().Interface().(sql.Scanner); ok {
		return s.Scan(src)
	}
	if src == nil {
		v.SetZero()
		return nil
	}
	if v.Kind() == reflect.Pointer {
		p := reflect.New(v.Type().Elem())
		if err := assign(p.Elem(), src); err != nil {
			return err
		}
		v.Set(p)
		return nil
	}
	sv := reflect.ValueOf(src)
	if b, ok := src.([]byte); ok && v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
		v.Set(reflect.ValueOf(append([]byte(nil), b...)).Convert(v.Type())) // the driver may reuse b
		return nil
	}
	if sv.Type().AssignableTo(v.Type()) {
		v.Set(sv)
		return nil
	}
	text, ok := asText(src)
	if !ok {
		return fmt.Errorf("unsupported conversion of %T into %s: give the field a type the column's values convert to, or an sql.Scanner", src, v.Type())
	}
	return assignText(v, src, text)
}

// assignText sets v from text, the text form of src.
func assignText(v reflect.Value, src any, text string) error {
	var err error
	switch k := v.Kind(); {
	case k == reflect.String:
		v.SetString(text)
	case k == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8:
		v.SetBytes([]byte(text))
	case k >= reflect.Int && k <= reflect.Int64:
		return setInt(v, text)
	case k >= reflect.Uint && k <= reflect.Uint64:
		var n uint64
		n, err = strconv.ParseUint(text, 10, v.Type().Bits())
		v.SetUint(n)
	case k == reflect.Float32 || k == reflect.Float64:
		var n float64
		n, err = strconv.ParseFloat(text, v.Type().Bits())
		v.SetFloat(n)
	case k == reflect.Bool:
		var b bool
		b, err = strconv.ParseBool(text)
		v.SetBool(b)
	default:
		return fmt.Errorf("unsupported conversion of %T into %s: give the field a type the column's values convert to, or an sql.Scanner", src, v.Type())
	}
	if err != nil {
		v.SetZero()
		return fmt.Errorf("converting %T %q to %s: %w", src, text, v.Type(), err)
	}
	return nil
}

// asText is src as text, where the driver's value has a text form: text, bytes, numbers and
// booleans (a time has none, as for Rows.Scan into a number).
func asText(src any) (string, bool) {
	switch s := src.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), true
	case int64:
		return strconv.FormatInt(s, 10), true
	case float64:
		return strconv.FormatFloat(s, 'g', -1, 64), true
	case bool:
		return strconv.FormatBool(s), true
	}
	return "", false
}

func setInt(v reflect.Value, text string) error {
	n, err := strconv.ParseInt(text, 10, v.Type().Bits())
	if err != nil {
		return fmt.Errorf("converting %q to %s: %w", text, v.Type(), err)
	}
	v.SetInt(n)
	return nil
}
