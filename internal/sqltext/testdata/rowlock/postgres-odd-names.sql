-- claim
SELECT "id ""x""", "`payload` data", "order", "group", "select" FROM "select `from` ""where""" WHERE "processed ""at""" IS NULL AND ("retry after" IS NULL OR "retry after" <= $1) AND "group" = $2 ORDER BY "`priority`", "retry after" NULLS FIRST, "id ""x""" LIMIT 1 FOR UPDATE SKIP LOCKED

-- claim(3)
SELECT "id ""x""", "`payload` data", "order", "group", "select" FROM "select `from` ""where""" WHERE "processed ""at""" IS NULL AND ("retry after" IS NULL OR "retry after" <= $1) AND "group" = $2 ORDER BY "`priority`", "retry after" NULLS FIRST, "id ""x""" LIMIT 3 FOR UPDATE SKIP LOCKED

-- ack
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" = $2

-- retry
UPDATE "select `from` ""where""" SET "order" = COALESCE("order", 0) + 1 WHERE "id ""x""" = $1

-- retryAfter
UPDATE "select `from` ""where""" SET "retry after" = $1, "order" = COALESCE("order", 0) + 1 WHERE "id ""x""" = $2

-- fail
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" = $2

-- relock
SELECT "id ""x""" FROM "select `from` ""where""" WHERE "id ""x""" = $1 AND "processed ""at""" IS NULL AND COALESCE("order", 0) = $2 FOR UPDATE SKIP LOCKED

-- ackIn(3)
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" IN ($2, $3, $4)

-- retryIn(3)
UPDATE "select `from` ""where""" SET "order" = COALESCE("order", 0) + 1 WHERE "id ""x""" IN ($1, $2, $3)

-- retryAfterIn(3)
UPDATE "select `from` ""where""" SET "retry after" = $1, "order" = COALESCE("order", 0) + 1 WHERE "id ""x""" IN ($2, $3, $4)

-- failIn(3)
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" IN ($2, $3, $4)

-- savepoint
SAVEPOINT inbox_handler

-- rollbackToSavepoint
ROLLBACK TO SAVEPOINT inbox_handler

-- ack unflushed
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" = $2 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackIn(3) unflushed
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" IN ($2, $3, $4) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
