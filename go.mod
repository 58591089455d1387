module github.com/sqlinbox/inbox

go 1.24
