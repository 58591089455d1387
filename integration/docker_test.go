package integration

import (
	"database/sql"
	"fmt"
	"os"
	"time"

	"github.com/ory/dockertest/v3"
	"github.com/ory/dockertest/v3/docker"
)

// dockerServers starts Postgres 15, MySQL 8.0 and MariaDB 10.11 containers when a Docker engine
// answers (INBOX_NO_DOCKER=1 skips the attempt). The containers expire on their own after ten
// minutes.
func dockerServers() (servers, bool) {
	if os.Getenv("INBOX_NO_DOCKER") == "1" {
		return servers{}, false
	}
	pool, err := dockertest.NewPool("")
	if err != nil || pool.Client.Ping() != nil {
		return servers{}, false
	}
	pool.MaxWait = 2 * time.Minute
	start := func(repo, tag, driver string, env []string, port string, dsn func(hostPort string) string) (string, error) {
		res, err := pool.RunWithOptions(&dockertest.RunOptions{Repository: repo, Tag: tag, Env: env},
			func(hc *docker.HostConfig) { hc.AutoRemove = true })
		if err != nil {
			return "", fmt.Errorf("starting %s:%s: %w", repo, tag, err)
		}
		res.Expire(600)
		url := dsn(res.GetHostPort(port))
		err = pool.Retry(func() error {
			db, err := sql.Open(driver, url)
			if err != nil {
				return err
			}
			defer db.Close()
			return db.Ping()
		})
		return url, err
	}
	var s servers
	var errs [3]error
	s.postgres, errs[0] = start("postgres", "15", "pgx",
		[]string{"POSTGRES_HOST_AUTH_METHOD=trust", "POSTGRES_DB=test"}, "5432/tcp",
		func(hp string) string { return "postgres://postgres@" + hp + "/test?sslmode=disable" })
	s.mysql, errs[1] = start("mysql", "8.0", "mysql",
		[]string{"MYSQL_ALLOW_EMPTY_PASSWORD=yes", "MYSQL_DATABASE=test"}, "3306/tcp",
		func(hp string) string { return "root@tcp(" + hp + ")/test" })
	s.mariadb, errs[2] = start("mariadb", "10.11", "mysql",
		[]string{"MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1", "MARIADB_DATABASE=test"}, "3306/tcp",
		func(hp string) string { return "root@tcp(" + hp + ")/test" })
	for _, err := range errs {
		if err != nil {
			fmt.Fprintln(os.Stderr, "integration: dockertest:", err, "- falling back to the DSNs in the environment")
			return servers{}, false
		}
	}
	return s, true
}
