package rowlock_test

import (
	"context"
	"database/sql"
	"log"

	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
	"github.com/sqlinbox/inbox/outcome"
	"github.com/sqlinbox/inbox/rowlock"
)

// The row lock form on MySQL: each delivery in work holds its claim's transaction, and with it a
// connection, until its outcome commits, so the pool takes the workers plus one for the
// application. The claim index keeps each claim to its own queue:
//
//	CREATE TABLE jobs (id BIGINT AUTO_INCREMENT PRIMARY KEY, payload LONGBLOB, queue VARCHAR(191) NOT NULL DEFAULT '',
//	    processed_at DATETIME(6) NULL, INDEX jobs_claim (queue, processed_at, id));
func ExampleNew() {
	jobs := inbox.Table{Name: "jobs", ID: "id", IDGenerated: true, Payload: "payload",
		Queue: "queue", ProcessedAt: "processed_at"}
	form := rowlock.New(dialect.MySQL[isolation.ReadCommitted]{}, jobs)

	// The driver: import _ "github.com/go-sql-driver/mysql".
	db, err := sql.Open("mysql", "app@tcp(localhost:3306)/app?parseTime=true")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(9)

	c := inbox.NewConsumer(db, form, inbox.HandlerFunc(func(ctx context.Context, dl *inbox.Delivery) outcome.Outcome {
		log.Printf("job %d of queue %s: %s", dl.ID, dl.Queue, dl.Payload)
		return outcome.Ack() // stamps processed_at and commits
	}), &inbox.Config{Queue: "emails", Workers: 8})
	if err := c.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
}
