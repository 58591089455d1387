package dialect

import (
	"context"
	"database/sql"
	"errors"
	"strconv"

	"github.com/sqlinbox/inbox/internal/sentinel"
)

// Galera reports whether the server behind db is a node of a Galera cluster (MariaDB Galera
// Cluster, Percona XtraDB Cluster: the server has wsrep_on ON), and how many nodes the cluster
// has now (wsrep_cluster_size); nodes is 0 when it is not one. Only a dialect whose server may
// be one (Caps.Clusters: MySQL, MariaDB) asks the server; elsewhere nodes is 0.
func Galera(ctx context.Context, d Dialect, db *sql.DB) (nodes int, err error) {
	if !d.Caps().Clusters {
		return 0, nil
	}
	var name, on string
	switch err := db.QueryRowContext(ctx, "SHOW GLOBAL VARIABLES LIKE 'wsrep_on'").Scan(&name, &on); {
	case errors.Is(err, sql.ErrNoRows): // MySQL without Galera has no such variable
		return 0, nil
	case err != nil:
		return 0, sentinel.Errorf(nil, "", "reading wsrep_on: %w", err)
	case on != "ON":
		return 0, nil
	}
	var size string
	if err := db.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'wsrep_cluster_size'").Scan(&name, &size); err != nil {
		return 0, sentinel.Errorf(nil, "", "reading wsrep_cluster_size: %w", err)
	}
	n, err := strconv.Atoi(size)
	if err != nil {
		return 0, sentinel.Errorf(nil, "", "wsrep_cluster_size is %q, not a number", size)
	}
	return max(n, 1), nil
}

// CheckGalera refuses the row lock and advisory forms on a node of a Galera cluster, with an
// error wrapping inbox.ErrDialect that says why and names the lease form. A Galera node's row
// locks and GET_LOCK locks are its own: consumers connected to two nodes take the same row
// (SKIP LOCKED does not skip a row another node locks) or the same key, and run its handler
// on both; only writes meet, at commit (certification, error 1213). The lease form's claim is
// such a write, so its claims of one row on two nodes conflict and one fails: it runs on
// Galera.
func CheckGalera(ctx context.Context, d Dialect, db *sql.DB, form Form) error {
	if form == LeaseForm {
		return nil
	}
	nodes, err := Galera(ctx, d, db)
	if err != nil || nodes == 0 {
		return err
	}
	what := "row locks (SELECT … FOR UPDATE SKIP LOCKED) are each node's own, so consumers on two nodes take the same row"
	if form == AdvisoryForm {
		what = "GET_LOCK locks are each node's own, so consumers on two nodes hold the same key"
	}
	return dialectError("the %s form does not run on a Galera cluster (wsrep_on is ON, %d nodes): %s and run its handler twice; use the lease form, whose claims of one row on two nodes conflict at commit", form, nodes, what)
}
