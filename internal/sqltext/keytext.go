package sqltext

import (
	"strconv"

	"github.com/sqlinbox/inbox/dialect"
)

// KeyText is the type, on MySQL and MariaDB, of a text column of at most chars characters that
// the library compares by key: a queue, a kind, a unique or group key, and the side tables'
// table names, queues and keys. Those servers' default collations (utf8mb4_general_ci,
// utf8mb4_uca1400_ai_ci, and even utf8mb4_bin, which pads) find "Alpha" equal to "alpha" and
// "beta " to "beta", so a consumer would claim rows of kinds and queues it does not run, two
// groups would share one hold and two keys one row. The type compares byte for byte, trailing
// spaces included: VARCHAR with the NO PAD binary collation where every server of the dialect
// has one (Caps.NoPadBinary, MariaDB's utf8mb4_nopad_bin), else VARBINARY of the bytes chars
// characters of utf8mb4 take (MySQL, whose utf8mb4_0900_bin MariaDB lacks; binary strings
// compare bytes and never pad). Elsewhere "TEXT": Postgres's deterministic collations and
// SQLite's BINARY compare exactly already.
func KeyText(c *dialect.Caps, chars int) string {
	switch {
	case c.Catalog != dialect.MySQLCatalog:
		return "TEXT"
	case c.NoPadBinary != "":
		return "VARCHAR(" + strconv.Itoa(chars) + ") CHARACTER SET utf8mb4 COLLATE " + c.NoPadBinary
	}
	return "VARBINARY(" + strconv.Itoa(4*chars) + ")"
}
