// Command inbox runs the library's demo: a queue in a database table, drained by a consumer.
//
//	go run ./cmd/inbox demo                      # embedded SQLite, no server needed
//	go run ./cmd/inbox demo -n 20000 -workers 8
//	go run ./cmd/inbox demo -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./cmd/inbox demo -dsn 'mysql://root@tcp(127.0.0.1:3306)/test'
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
)

const usage = `usage: inbox <command> [flags]

commands:
  demo    publish messages to a table and drain them with a lease consumer (inbox demo -h)
  bench   throughput of every form and database beside a raw SQL loop, latency, memory (inbox bench -h)
`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var err error
	switch os.Args[1] {
	case "demo":
		err = demo(ctx, os.Args[2:])
	case "bench":
		err = bench(ctx, os.Args[2:])
	case "-h", "-help", "--help", "help":
		fmt.Print(usage)
		return
	default:
		fmt.Fprintf(os.Stderr, "inbox: unknown command %q\n%s", os.Args[1], usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "inbox:", err)
		os.Exit(1)
	}
}
