module github.com/sqlinbox/inbox/sqlmocktests

go 1.24

replace github.com/sqlinbox/inbox => ../

require (
	github.com/DATA-DOG/go-sqlmock v1.5.2
	github.com/sqlinbox/inbox v0.0.0-00010101000000-000000000000
)
