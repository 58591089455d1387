// Package integration runs the library against real databases: Postgres, MariaDB (under both
// the MySQL and the MariaDB dialect) and SQLite.
//
// Servers come from a Docker engine through dockertest when one answers, and otherwise from the
// DSNs in the environment:
//
//	INBOX_POSTGRES_DSN  default postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//	INBOX_MYSQL_DSN     default root@tcp(127.0.0.1:3306)/test (a MariaDB server stands in for MySQL)
//	INBOX_MARIADB_DSN   default INBOX_MYSQL_DSN
//
// SQLite needs no server. A database that cannot be reached skips its tests, unless
// INBOX_REQUIRE_DATABASES=1, which makes it a failure (CI sets it).
package integration
