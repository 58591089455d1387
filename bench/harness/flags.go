package harness

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
)

// Main runs a benchmark command called name: run with the command's arguments, under a context
// that an interrupt, or another of signals, cancels. An error run returns is printed to stderr
// after the name, and the process exits 1; flag.ErrHelp (the flag set printed its usage after
// -h) is no error.
func Main(name string, run func(ctx context.Context, args []string) error, signals ...os.Signal) {
	ctx, stop := signal.NotifyContext(context.Background(), append([]os.Signal{os.Interrupt}, signals...)...)
	defer stop()
	if err := run(ctx, os.Args[1:]); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, name+":", err)
		os.Exit(1)
	}
}

// Ints reads flag -name's comma-separated positive integers, each once, in ascending order.
func Ints(name, value string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(value, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("-%s %q: want positive integers, comma-separated", name, value)
		}
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out, nil
}

// Names reads flag -name's comma-separated names, each once, in the order given, and refuses a
// name not among known.
func Names(name, value string, known []string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(value, ",") {
		f = strings.TrimSpace(f)
		if !slices.Contains(known, f) {
			return nil, fmt.Errorf("-%s: unknown %q: want some of %s", name, f, strings.Join(known, ", "))
		}
		if !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// DSNFlag defines -dsn on fs: database=DSN, repeatable, each kept in dsns under its database,
// which must be one of known.
func DSNFlag(fs *flag.FlagSet, dsns map[string]string, known []string) {
	fs.Func("dsn", "database=DSN, repeatable (defaults: the development machine's servers; sqlite: a new file in a temporary directory)", func(s string) error {
		name, dsn, ok := strings.Cut(s, "=")
		if !ok || !slices.Contains(known, name) {
			return fmt.Errorf("-dsn %q: want database=DSN with database one of %s", s, strings.Join(known, ", "))
		}
		dsns[name] = dsn
		return nil
	})
}

// NotOnSQLite refuses, where dbs names sqlite, any of forms but the lease form: SQLite has no
// row locks to skip and no advisory locks.
func NotOnSQLite(forms, dbs []string) error {
	if !slices.Contains(dbs, "sqlite") {
		return nil
	}
	for _, f := range forms {
		if f != "lease" {
			return fmt.Errorf("-forms %s: not on sqlite, which has the lease form only (leave sqlite out of -db)", f)
		}
	}
	return nil
}

// CellLists reads the values of the flags that name a run's cells: -workers (Ints), -db (Names
// among Databases) and -forms (Names among Forms).
func CellLists(workers, dbs, forms string) ([]int, []string, []string, error) {
	ws, err := Ints("workers", workers)
	if err != nil {
		return nil, nil, nil, err
	}
	ds, err := Names("db", dbs, Databases)
	if err != nil {
		return nil, nil, nil, err
	}
	fs, err := Names("forms", forms, Forms)
	if err != nil {
		return nil, nil, nil, err
	}
	return ws, ds, fs, nil
}
