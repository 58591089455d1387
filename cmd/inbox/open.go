package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// open opens t for a command of access a with a pool of pool connections, and checks that the
// database answers. A SQLite file that a must find and does not (or whose directory is
// missing) is refused before SQLite is asked, which would say "out of memory (14)".
func open(ctx context.Context, t target, pool int, a access) (*sql.DB, error) {
	if t.driver == "sqlite" {
		if err := findFile(t, a); err != nil {
			return nil, err
		}
	}
	db, err := sql.Open(t.driver, t.sourceFor(a))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", t.shown, err)
	}
	db.SetMaxOpenConns(pool)
	db.SetMaxIdleConns(pool)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connecting to %s: %w", t.shown, err)
	}
	return db, nil
}

// findFile checks that the SQLite file of t exists, or for a command that creates it, that its
// directory does.
func findFile(t target, a access) error {
	if a == createFile {
		dir := filepath.Dir(t.file)
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("no directory %s for the database file %s: create the directory first", dir, t.shown)
		}
		return nil
	}
	if _, err := os.Stat(t.file); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("no database file at %s", t.shown)
	}
	return nil
}
