-- claim
WITH inbox_lease_pick AS (SELECT "id ""x""" FROM "select `from` ""where""" WHERE "processed ""at""" IS NULL AND ("retry after" IS NULL OR "retry after" <= $1) AND "group" = $2 AND ("locked `until` ""now""" IS NULL OR "locked `until` ""now""" < $3) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' ORDER BY "`priority`", "retry after" NULLS FIRST, "id ""x""" LIMIT 1 FOR UPDATE SKIP LOCKED), inbox_lease_claimed AS (UPDATE "select `from` ""where""" SET "locked `until` ""now""" = $4, "order" = COALESCE("order", 0) + 1 FROM inbox_lease_pick WHERE "select `from` ""where"""."id ""x""" = inbox_lease_pick."id ""x""" RETURNING "select `from` ""where"""."id ""x""", "select `from` ""where"""."`payload` data", "select `from` ""where"""."order", "select `from` ""where"""."group", "select `from` ""where"""."select", "select `from` ""where"""."`priority`", "select `from` ""where"""."retry after") SELECT "id ""x""", "`payload` data", "order", "group", "select" FROM inbox_lease_claimed ORDER BY "`priority`", "retry after" NULLS FIRST, "id ""x"""

-- claim(3)
WITH inbox_lease_pick AS (SELECT "id ""x""" FROM "select `from` ""where""" WHERE "processed ""at""" IS NULL AND ("retry after" IS NULL OR "retry after" <= $1) AND "group" = $2 AND ("locked `until` ""now""" IS NULL OR "locked `until` ""now""" < $3) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' ORDER BY "`priority`", "retry after" NULLS FIRST, "id ""x""" LIMIT 3 FOR UPDATE SKIP LOCKED), inbox_lease_claimed AS (UPDATE "select `from` ""where""" SET "locked `until` ""now""" = $4, "order" = COALESCE("order", 0) + 1 FROM inbox_lease_pick WHERE "select `from` ""where"""."id ""x""" = inbox_lease_pick."id ""x""" RETURNING "select `from` ""where"""."id ""x""", "select `from` ""where"""."`payload` data", "select `from` ""where"""."order", "select `from` ""where"""."group", "select `from` ""where"""."select", "select `from` ""where"""."`priority`", "select `from` ""where"""."retry after") SELECT "id ""x""", "`payload` data", "order", "group", "select" FROM inbox_lease_claimed ORDER BY "`priority`", "retry after" NULLS FIRST, "id ""x"""

-- extend
UPDATE "select `from` ""where""" SET "locked `until` ""now""" = $1 WHERE "id ""x""" = $2 AND "locked `until` ""now""" = $3 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ack
UPDATE "select `from` ""where""" SET "processed ""at""" = $1, "locked `until` ""now""" = NULL WHERE "id ""x""" = $2 AND "locked `until` ""now""" = $3

-- retry
UPDATE "select `from` ""where""" SET "locked `until` ""now""" = NULL WHERE "id ""x""" = $1 AND "locked `until` ""now""" = $2

-- retryAfter
UPDATE "select `from` ""where""" SET "retry after" = $1, "locked `until` ""now""" = NULL WHERE "id ""x""" = $2 AND "locked `until` ""now""" = $3

-- extendIn(3)
UPDATE "select `from` ""where""" SET "locked `until` ""now""" = $1 WHERE "id ""x""" IN ($2, $3, $4) AND "locked `until` ""now""" = $5 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackIn(3)
UPDATE "select `from` ""where""" SET "processed ""at""" = $1, "locked `until` ""now""" = NULL WHERE "id ""x""" IN ($2, $3, $4) AND "locked `until` ""now""" = $5

-- retryIn(3)
UPDATE "select `from` ""where""" SET "locked `until` ""now""" = NULL WHERE "id ""x""" IN ($1, $2, $3) AND "locked `until` ""now""" = $4

-- retryAfterIn(3)
UPDATE "select `from` ""where""" SET "retry after" = $1, "locked `until` ""now""" = NULL WHERE "id ""x""" IN ($2, $3, $4) AND "locked `until` ""now""" = $5

-- ackPairs(2)
UPDATE "select `from` ""where""" SET "processed ""at""" = $1, "locked `until` ""now""" = NULL WHERE ("id ""x""" = $2 AND "locked `until` ""now""" = $3) OR ("id ""x""" = $4 AND "locked `until` ""now""" = $5) RETURNING "id ""x"""

-- retryPairs(2)
UPDATE "select `from` ""where""" SET "locked `until` ""now""" = NULL WHERE ("id ""x""" = $1 AND "locked `until` ""now""" = $2) OR ("id ""x""" = $3 AND "locked `until` ""now""" = $4) RETURNING "id ""x"""

-- ackIn(3) returning
UPDATE "select `from` ""where""" SET "processed ""at""" = $1, "locked `until` ""now""" = NULL WHERE "id ""x""" IN ($2, $3, $4) AND "locked `until` ""now""" = $5 RETURNING "id ""x"""

-- retryIn(3) returning
UPDATE "select `from` ""where""" SET "locked `until` ""now""" = NULL WHERE "id ""x""" IN ($1, $2, $3) AND "locked `until` ""now""" = $4 RETURNING "id ""x"""

-- retryAfterIn(3) returning
UPDATE "select `from` ""where""" SET "retry after" = $1, "locked `until` ""now""" = NULL WHERE "id ""x""" IN ($2, $3, $4) AND "locked `until` ""now""" = $5 RETURNING "id ""x"""

-- ack unflushed
UPDATE "select `from` ""where""" SET "processed ""at""" = $1, "locked `until` ""now""" = NULL WHERE "id ""x""" = $2 AND "locked `until` ""now""" = $3 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackPairs(2) unflushed
UPDATE "select `from` ""where""" SET "processed ""at""" = $1, "locked `until` ""now""" = NULL WHERE (("id ""x""" = $2 AND "locked `until` ""now""" = $3) OR ("id ""x""" = $4 AND "locked `until` ""now""" = $5)) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' RETURNING "id ""x"""

-- ackIn(3) returning unflushed
UPDATE "select `from` ""where""" SET "processed ""at""" = $1, "locked `until` ""now""" = NULL WHERE "id ""x""" IN ($2, $3, $4) AND "locked `until` ""now""" = $5 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' RETURNING "id ""x"""
