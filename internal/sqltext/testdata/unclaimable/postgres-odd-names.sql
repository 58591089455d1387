-- null-queue
SELECT "id ""x""" FROM "select `from` ""where""" WHERE "processed ""at""" IS NULL AND "group" IS NULL LIMIT 1001

-- far-ahead
SELECT "id ""x""" FROM "select `from` ""where""" WHERE "processed ""at""" IS NULL AND "group" = $1 AND "retry after" > $2 LIMIT 1001
