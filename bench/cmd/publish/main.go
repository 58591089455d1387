// Command publish measures publishing: this library's Enqueue beside the peers' batch inserts
// (River's InsertMany and InsertManyFast, gue's EnqueueBatch) on Postgres, and ours alone on
// MariaDB (twice: the DSN as given, and with interpolateParams=true) and SQLite. Each contender publishes -n rows in one call, then in calls of -call rows,
// and -singles rows one call each, timing each call for the latency; every call commits its rows
// together (all or nothing). Rounds run every contender in turn (harness.Rounds), so a ratio of
// ours to a peer is the median over rounds of the pair measured in the same round.
//
//	go run ./bench/cmd/publish                                # from the repository's root
//	go run ./bench/cmd/publish -db postgres -n 2000 -rounds 1 # a quick look
//	go run ./bench/cmd/publish -db postgres -peers none -raw -count-trips -cpuprofile cpu.out
//
// With -raw, hand-written publishes of the same rows run beside ours, each all or nothing: the
// library's multi-row INSERT at other chunk sizes (on the one-call shape), and on Postgres one
// INSERT … SELECT FROM unnest of an array per column and a COPY (pgx's CopyFrom through
// database/sql's Conn.Raw) on both shapes: what a change of the library's publish could reach.
//
// It lives in the bench module, so that the peers' dependencies never reach the library's.
package main

import (
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"

	"github.com/sqlinbox/inbox/bench/harness"
)

// contender is one way to publish rows: ours, a peer's, or a raw experiment.
type contender interface {
	// name is how the tables show it.
	name() string
	role() role
	// empty deletes the contender's rows, untimed, before each measurement.
	empty(ctx context.Context) error
	// count counts the contender's rows, to check that every call's rows landed.
	count(ctx context.Context) (int64, error)
	// prepare builds, untimed, the input of one call publishing the rows of Payload(from+1) to
	// Payload(from+rows), and returns the call: it publishes them all or nothing.
	prepare(from, rows int) func(ctx context.Context) error
	// one publishes the row of Payload(seq) by the contender's single-message call, which
	// oneName names for the latency table; "" for none.
	one(ctx context.Context, seq int) error
	oneName() string
	close()
}

// role says what a contender stands for in the tables.
type role int

const (
	oursRole    role = iota // this library's Enqueue
	peerRole                // a peer's documented call
	rawRole                 // a hand-written publish (-raw): no latency
	variantRole             // ours under another driver setting (MariaDB: interpolateParams=true)
)

type config struct {
	n, call, singles, rounds int
	dbs, peers               []string
	dsns                     map[string]string
	raw                      bool
	chunks                   []int
	countTrips               bool
	cpuProfile               string
	out                      io.Writer // the tables; the per-round lines go to stderr
}

func main() { harness.Main("publish", run) }

func run(ctx context.Context, args []string) error {
	cfg, err := parseFlags(args)
	if err != nil {
		return err
	}
	stop, err := harness.CPUProfile(cfg.cpuProfile)
	if err != nil {
		return err
	}
	defer stop()
	results, err := runPublish(ctx, cfg)
	if err != nil {
		return err
	}
	report(cfg.out, cfg, results)
	return nil
}

// parseFlags reads the command's flags.
func parseFlags(args []string) (*config, error) {
	fs := flag.NewFlagSet("publish", flag.ContinueOnError)
	cfg := &config{dsns: map[string]string{}, out: os.Stdout}
	fs.IntVar(&cfg.n, "n", 10000, "rows per measurement: published in one call, then in calls of -call rows")
	fs.IntVar(&cfg.call, "call", 100, "rows per call of the second shape (-n must be a multiple)")
	fs.IntVar(&cfg.singles, "singles", 2000, "single-row publishes per round for the latency (0: none)")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds (every contender once per round, in turning order)")
	dbs := fs.String("db", "postgres,mariadb,sqlite", "databases: postgres, mariadb, sqlite")
	peers := fs.String("peers", "river,gue", "peers on Postgres: river, gue; none for ours alone")
	harness.DSNFlag(fs, cfg.dsns, []string{"postgres", "mariadb", "sqlite"})
	fs.BoolVar(&cfg.raw, "raw", false, "also run hand-written publishes: multi-row INSERTs in chunks of -chunks rows (one-call shape), and on Postgres unnest and COPY (both shapes)")
	chunks := fs.String("chunks", "100,1000,5000,10000", "-raw: rows per INSERT, comma-separated")
	fs.BoolVar(&cfg.countTrips, "count-trips", false, "count our calls' round trips, statements and commits through a counting driver wrapper and print them per call (our rates then run through the wrapper)")
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this path")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	var err error
	if cfg.dbs, err = harness.Names("db", *dbs, []string{"postgres", "mariadb", "sqlite"}); err != nil {
		return nil, err
	}
	if strings.TrimSpace(*peers) != "none" {
		if cfg.peers, err = harness.Names("peers", *peers, []string{"river", "gue"}); err != nil {
			return nil, err
		}
	}
	if cfg.chunks, err = harness.Ints("chunks", *chunks); err != nil {
		return nil, err
	}
	if cfg.n < 1 || cfg.call < 1 || cfg.rounds < 1 || cfg.singles < 0 || cfg.n%cfg.call != 0 {
		return nil, errors.New("-n, -call and -rounds must be at least 1, -singles at least 0, and -n a multiple of -call")
	}
	return cfg, nil
}
