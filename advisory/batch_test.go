package advisory

import (
	"github.com/sqlinbox/inbox"
	"github.com/sqlinbox/inbox/dialect"
	"github.com/sqlinbox/inbox/isolation"
)

// The form claims batches on every dialect it takes.
var (
	_ inbox.BatchForm = (*Form[dialect.Postgres[isolation.Default]])(nil)
	_ inbox.BatchForm = (*Form[dialect.MySQL[isolation.ReadCommitted]])(nil)
	_ inbox.BatchForm = (*Form[dialect.MariaDB[isolation.Serializable]])(nil)
)
