-- next-due
SELECT MIN(`retry after`) FROM `select ``from`` "where"` WHERE `processed "at"` IS NULL AND `retry after` > ? AND `group` = ?

-- data-version
PRAGMA data_version
