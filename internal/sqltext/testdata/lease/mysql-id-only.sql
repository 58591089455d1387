-- claim
SELECT `id` FROM `jobs` WHERE 1 = 1 AND (`locked_until` IS NULL OR `locked_until` < ?) ORDER BY `id` LIMIT ? FOR UPDATE SKIP LOCKED

-- stamp(1)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (?)

-- stamp(3)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (?, ?, ?)

-- extend
UPDATE `jobs` SET `locked_until` = ? WHERE `id` = ? AND `locked_until` = ?

-- ack
DELETE FROM `jobs` WHERE `id` = ? AND `locked_until` = ?

-- retry
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` = ? AND `locked_until` = ?

-- extendIn(3)
UPDATE `jobs` SET `locked_until` = ? WHERE `id` IN (?, ?, ?) AND `locked_until` = ?

-- ackIn(3)
DELETE FROM `jobs` WHERE `id` IN (?, ?, ?) AND `locked_until` = ?

-- retryIn(3)
UPDATE `jobs` SET `locked_until` = NULL WHERE `id` IN (?, ?, ?) AND `locked_until` = ?

-- heldIn(3)
SELECT `id` FROM `jobs` WHERE `id` IN (?, ?, ?) AND `locked_until` = ? FOR UPDATE
