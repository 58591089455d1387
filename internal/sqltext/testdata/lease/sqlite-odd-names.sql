-- claim
SELECT `id "x"`, ```payload`` data`, `order`, `group`, `select` FROM `select ``from`` "where"` WHERE `processed "at"` IS NULL AND (`retry after` IS NULL OR `retry after` <= ?) AND `group` = ? AND (`locked ``until`` "now"` IS NULL OR `locked ``until`` "now"` < ?) ORDER BY ```priority```, `retry after`, `id "x"` LIMIT ?

-- stamp(1)
UPDATE `select ``from`` "where"` SET `locked ``until`` "now"` = ?, `order` = COALESCE(`order`, 0) + 1 WHERE `id "x"` IN (?)

-- stamp(3)
UPDATE `select ``from`` "where"` SET `locked ``until`` "now"` = ?, `order` = COALESCE(`order`, 0) + 1 WHERE `id "x"` IN (?, ?, ?)

-- extend
UPDATE `select ``from`` "where"` SET `locked ``until`` "now"` = ? WHERE `id "x"` = ? AND `locked ``until`` "now"` = ?

-- ack
UPDATE `select ``from`` "where"` SET `processed "at"` = ?, `locked ``until`` "now"` = NULL WHERE `id "x"` = ? AND `locked ``until`` "now"` = ?

-- retry
UPDATE `select ``from`` "where"` SET `locked ``until`` "now"` = NULL WHERE `id "x"` = ? AND `locked ``until`` "now"` = ?

-- retryAfter
UPDATE `select ``from`` "where"` SET `retry after` = ?, `locked ``until`` "now"` = NULL WHERE `id "x"` = ? AND `locked ``until`` "now"` = ?

-- extendIn(3)
UPDATE `select ``from`` "where"` SET `locked ``until`` "now"` = ? WHERE `id "x"` IN (?, ?, ?) AND `locked ``until`` "now"` = ?

-- ackIn(3)
UPDATE `select ``from`` "where"` SET `processed "at"` = ?, `locked ``until`` "now"` = NULL WHERE `id "x"` IN (?, ?, ?) AND `locked ``until`` "now"` = ?

-- retryIn(3)
UPDATE `select ``from`` "where"` SET `locked ``until`` "now"` = NULL WHERE `id "x"` IN (?, ?, ?) AND `locked ``until`` "now"` = ?

-- retryAfterIn(3)
UPDATE `select ``from`` "where"` SET `retry after` = ?, `locked ``until`` "now"` = NULL WHERE `id "x"` IN (?, ?, ?) AND `locked ``until`` "now"` = ?

-- ackPairs(2)
UPDATE `select ``from`` "where"` SET `processed "at"` = ?, `locked ``until`` "now"` = NULL WHERE (`id "x"` = ? AND `locked ``until`` "now"` = ?) OR (`id "x"` = ? AND `locked ``until`` "now"` = ?) RETURNING `id "x"`

-- retryPairs(2)
UPDATE `select ``from`` "where"` SET `locked ``until`` "now"` = NULL WHERE (`id "x"` = ? AND `locked ``until`` "now"` = ?) OR (`id "x"` = ? AND `locked ``until`` "now"` = ?) RETURNING `id "x"`

-- ackIn(3) returning
UPDATE `select ``from`` "where"` SET `processed "at"` = ?, `locked ``until`` "now"` = NULL WHERE `id "x"` IN (?, ?, ?) AND `locked ``until`` "now"` = ? RETURNING `id "x"`

-- retryIn(3) returning
UPDATE `select ``from`` "where"` SET `locked ``until`` "now"` = NULL WHERE `id "x"` IN (?, ?, ?) AND `locked ``until`` "now"` = ? RETURNING `id "x"`

-- retryAfterIn(3) returning
UPDATE `select ``from`` "where"` SET `retry after` = ?, `locked ``until`` "now"` = NULL WHERE `id "x"` IN (?, ?, ?) AND `locked ``until`` "now"` = ? RETURNING `id "x"`
