module github.com/sqlinbox/inbox/sqlmocktests

go 1.26

replace github.com/sqlinbox/inbox => ../

require github.com/DATA-DOG/go-sqlmock v1.5.2 // indirect
