-- null-queue
SELECT `id "x"` FROM `select ``from`` "where"` WHERE `processed "at"` IS NULL AND `group` IS NULL LIMIT 1001

-- far-ahead
SELECT `id "x"` FROM `select ``from`` "where"` WHERE `processed "at"` IS NULL AND `group` = ? AND `retry after` > ? AND `retry after` GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]' LIMIT 1001

-- bad-layout
SELECT `id "x"` FROM `select ``from`` "where"` WHERE `processed "at"` IS NULL AND `group` = ? AND `retry after` IS NOT NULL AND (typeof(`retry after`) <> 'text' OR `retry after` NOT GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9] [0-9][0-9]:[0-9][0-9]:[0-9][0-9].[0-9][0-9][0-9][0-9][0-9][0-9]') LIMIT 1001
