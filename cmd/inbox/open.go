package main

import (
	"context"
	"database/sql"
	"fmt"

	_ "github.com/glebarez/go-sqlite"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

// open opens t with a pool of pool connections, and checks that the database answers.
func open(ctx context.Context, t target, pool int) (*sql.DB, error) {
	db, err := sql.Open(t.driver, t.source)
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
