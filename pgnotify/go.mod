module github.com/sqlinbox/inbox/pgnotify

go 1.26

require (
	github.com/jackc/pgx/v5 v5.12.0
	github.com/sqlinbox/inbox v0.0.0-20261203150428-c375506d5ee4
)

require (
	github.com/jackc/pgpassfile v1.0.0 // indirect
	github.com/jackc/pgservicefile v0.0.0-20240606120523-5a60cdf6a761 // indirect
	golang.org/x/text v0.41.0 // indirect
)
