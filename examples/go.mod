module github.com/sqlinbox/inbox/examples

go 1.25.0

require (
	github.com/glebarez/go-sqlite v1.23.0
	github.com/sqlinbox/inbox v0.0.0-20261201211424-8037a13ddd99
)
