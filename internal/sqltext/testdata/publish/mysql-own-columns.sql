-- insert(1)
INSERT INTO `jobs` (`payload`, `queue`, `priority`, `headers`, `retry_after`, `account`, `region`) VALUES (?, ?, ?, ?, ?, ?, ?)

-- insert(3)
INSERT INTO `jobs` (`payload`, `queue`, `priority`, `headers`, `retry_after`, `account`, `region`) VALUES (?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?, ?)

-- insertID
INSERT INTO `jobs` (`payload`, `queue`, `priority`, `headers`, `retry_after`, `account`, `region`) VALUES (?, ?, ?, ?, ?, ?, ?)
