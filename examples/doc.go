// Package examples holds programs that show the library at work on an embedded SQLite
// database, with no server: each Example runs in the tests and checks what it prints.
package examples
