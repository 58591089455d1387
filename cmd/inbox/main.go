// Command inbox is the library's command-line tool. Today it runs the demo: a queue in a
// database table, drained by a consumer.
//
//	go run ./cmd/inbox demo                      # embedded SQLite, no server needed
//	go run ./cmd/inbox demo -n 20000 -workers 8
//	go run ./cmd/inbox demo -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable'
//	go run ./cmd/inbox demo -dsn 'mysql://root@tcp(127.0.0.1:3306)/test'
//	go run ./cmd/inbox version
//
// The benchmarks are commands of the bench/ module: go run ./bench/cmd/throughput and
// go run ./bench/cmd/peers.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
)

const usage = `usage: inbox <command> [flags]

commands:
  demo      publish messages to a table and drain them with a lease consumer (inbox demo -h)
  version   print the versions of this command, the library and Go
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
	case "version":
		fmt.Println(version())
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

// version names the command's module version, the library's it was built with, and Go's, as the
// build recorded them: "(devel)" for a build from a checkout.
func version() string {
	cmd, lib := "unknown", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		cmd = bi.Main.Version
		for _, m := range bi.Deps {
			if m.Path == "github.com/sqlinbox/inbox" {
				lib = m.Version
				if m.Replace != nil {
					lib += " (replaced by " + m.Replace.Path + ")"
				}
			}
		}
	}
	return fmt.Sprintf("inbox %s, library github.com/sqlinbox/inbox %s, %s", cmd, lib, runtime.Version())
}
