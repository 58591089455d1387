-- insert(1)
INSERT INTO "select `from` ""where""" ("`payload` data", "group", "`priority`", "select", "retry after") VALUES ($1, $2, $3, $4, $5)

-- insert(3)
INSERT INTO "select `from` ""where""" ("`payload` data", "group", "`priority`", "select", "retry after") VALUES ($1, $2, $3, $4, $5), ($6, $7, $8, $9, $10), ($11, $12, $13, $14, $15)

-- insertID
INSERT INTO "select `from` ""where""" ("`payload` data", "group", "`priority`", "select", "retry after") VALUES ($1, $2, $3, $4, $5) RETURNING "id ""x"""

-- insert(1) notifying
WITH published AS (INSERT INTO "select `from` ""where""" ("`payload` data", "group", "`priority`", "select", "retry after") VALUES ($1, $2, $3, $4, $5)) SELECT pg_notify($6, '')

-- insert(3) notifying
WITH published AS (INSERT INTO "select `from` ""where""" ("`payload` data", "group", "`priority`", "select", "retry after") VALUES ($1, $2, $3, $4, $5), ($6, $7, $8, $9, $10), ($11, $12, $13, $14, $15)) SELECT pg_notify($16, '')
