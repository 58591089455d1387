-- insert(1)
INSERT INTO "jobs" ("id") VALUES (DEFAULT)

-- insert(3)
INSERT INTO "jobs" ("id") VALUES (DEFAULT), (DEFAULT), (DEFAULT)

-- insertID
INSERT INTO "jobs" ("id") VALUES (DEFAULT) RETURNING "id"
