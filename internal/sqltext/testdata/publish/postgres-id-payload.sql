-- insert(1)
INSERT INTO "jobs" ("id", "payload") VALUES ($1, $2)

-- insert(3)
INSERT INTO "jobs" ("id", "payload") VALUES ($1, $2), ($3, $4), ($5, $6)

-- insertID
INSERT INTO "jobs" ("id", "payload") VALUES ($1, $2)
