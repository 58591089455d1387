-- keyCheck
SELECT 'odd ' || COALESCE(CAST("group" AS TEXT), '') || ':' || COALESCE(CAST("id ""x""" AS TEXT), '') FROM "select `from` ""where""" WHERE 1 = 0

-- candidates
SELECT c."id ""x""", c.inbox_key FROM (SELECT "id ""x""", 'odd ' || COALESCE(CAST("group" AS TEXT), '') || ':' || COALESCE(CAST("id ""x""" AS TEXT), '') AS inbox_key FROM "select `from` ""where""" WHERE "processed ""at""" IS NULL AND ("retry after" IS NULL OR "retry after" <= $1) AND "group" = $2 ORDER BY "`priority`", "retry after" NULLS FIRST, "id ""x""" OFFSET 0) c WHERE pg_try_advisory_xact_lock_shared(hashtextextended(c.inbox_key, 0)) LIMIT $3

-- lock
SELECT pg_try_advisory_lock(hashtextextended($1, 0))

-- unlock
SELECT pg_advisory_unlock(hashtextextended($1, 0))

-- take
UPDATE "select `from` ""where""" SET "order" = COALESCE("order", 0) + 1 WHERE "id ""x""" = $1 AND ('odd ' || COALESCE(CAST("group" AS TEXT), '') || ':' || COALESCE(CAST("id ""x""" AS TEXT), '')) = $2 AND "processed ""at""" IS NULL AND ("retry after" IS NULL OR "retry after" <= $3) AND "group" = $4 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off' RETURNING "id ""x""", "`payload` data", "order", "group", "select"

-- ack
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" = $2

-- retryAfter
UPDATE "select `from` ""where""" SET "retry after" = $1 WHERE "id ""x""" = $2

-- unlockMany(3)
SELECT COUNT(*) FROM (VALUES (CAST($1 AS TEXT)), (CAST($2 AS TEXT)), (CAST($3 AS TEXT))) AS k(v) WHERE pg_advisory_unlock(hashtextextended(k.v, 0))

-- ackMany(3)
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" IN ($2, $3, $4)

-- retryAfterMany(3)
UPDATE "select `from` ""where""" SET "retry after" = $1 WHERE "id ""x""" IN ($2, $3, $4)

-- ack unflushed
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" = $2 AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'

-- ackMany(3) unflushed
UPDATE "select `from` ""where""" SET "processed ""at""" = $1 WHERE "id ""x""" IN ($2, $3, $4) AND (SELECT set_config('synchronous_commit', 'off', true)) = 'off'
