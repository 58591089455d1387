-- stats
SELECT "group", COUNT(CASE WHEN "processed ""at""" IS NULL AND "dead `at`" IS NULL AND ("locked `until` ""now""" IS NULL OR "locked `until` ""now""" < $1) AND ("retry after" IS NULL OR "retry after" <= $2) THEN 1 END), COUNT(CASE WHEN "processed ""at""" IS NULL AND "dead `at`" IS NULL AND ("locked `until` ""now""" IS NULL OR "locked `until` ""now""" < $3) AND "retry after" > $4 THEN 1 END), COUNT(CASE WHEN "processed ""at""" IS NULL AND "dead `at`" IS NULL AND "locked `until` ""now""" >= $5 THEN 1 END), COUNT(CASE WHEN "processed ""at""" IS NULL AND "dead `at`" IS NULL AND ("locked `until` ""now""" IS NULL OR "locked `until` ""now""" < $6) AND "order" > 0 THEN 1 END), COUNT(CASE WHEN "dead `at`" IS NOT NULL THEN 1 END), COUNT(CASE WHEN "processed ""at""" IS NOT NULL AND "dead `at`" IS NULL THEN 1 END), MIN(CASE WHEN "processed ""at""" IS NULL AND "dead `at`" IS NULL AND ("locked `until` ""now""" IS NULL OR "locked `until` ""now""" < $7) AND "retry after" <= $8 THEN "retry after" END), COUNT(CASE WHEN "processed ""at""" IS NULL AND "dead `at`" IS NULL AND ("locked `until` ""now""" IS NULL OR "locked `until` ""now""" < $9) AND "retry after" IS NULL THEN 1 END) FROM "select `from` ""where""" GROUP BY "group" ORDER BY "group"

-- dead
SELECT "id ""x""", "group", COALESCE("order", 0), "dead `at`", COALESCE("""error""", '') FROM "select `from` ""where""" WHERE "dead `at`" IS NOT NULL ORDER BY "dead `at`" DESC, "id ""x""" DESC LIMIT $1

-- dead(after)
SELECT "id ""x""", "group", COALESCE("order", 0), "dead `at`", COALESCE("""error""", '') FROM "select `from` ""where""" WHERE "dead `at`" IS NOT NULL AND ("dead `at`" < $1 OR "dead `at`" = $2 AND "id ""x""" < $3) ORDER BY "dead `at`" DESC, "id ""x""" DESC LIMIT $4

-- dead(queue, after)
SELECT "id ""x""", "group", COALESCE("order", 0), "dead `at`", COALESCE("""error""", '') FROM "select `from` ""where""" WHERE "dead `at`" IS NOT NULL AND "group" = $1 AND ("dead `at`" < $2 OR "dead `at`" = $3 AND "id ""x""" < $4) ORDER BY "dead `at`" DESC, "id ""x""" DESC LIMIT $5

-- pickDead
SELECT "id ""x""" FROM "select `from` ""where""" WHERE "dead `at`" IS NOT NULL AND "id ""x""" > $1 ORDER BY "id ""x""" LIMIT $2

-- pickDead(queue)
SELECT "id ""x""" FROM "select `from` ""where""" WHERE "dead `at`" IS NOT NULL AND "group" = $1 AND "id ""x""" > $2 ORDER BY "id ""x""" LIMIT $3

-- requeue(3)
UPDATE "select `from` ""where""" SET "dead `at`" = NULL, "retry after" = NULL, "order" = 0 WHERE "id ""x""" IN ($1, $2, $3) AND "dead `at`" IS NOT NULL

-- purgeDead(3)
DELETE FROM "select `from` ""where""" WHERE "id ""x""" IN ($1, $2, $3) AND "dead `at`" IS NOT NULL

-- pickProcessed
SELECT "id ""x""" FROM "select `from` ""where""" WHERE "processed ""at""" < $1 AND "id ""x""" > $2 ORDER BY "id ""x""" LIMIT $3

-- pickProcessed(queue)
SELECT "id ""x""" FROM "select `from` ""where""" WHERE "processed ""at""" < $1 AND "group" = $2 AND "id ""x""" > $3 ORDER BY "id ""x""" LIMIT $4

-- purgeProcessed(3)
DELETE FROM "select `from` ""where""" WHERE "id ""x""" IN ($1, $2, $3) AND "processed ""at""" < $4
