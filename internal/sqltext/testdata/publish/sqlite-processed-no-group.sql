-- insert(1)
INSERT INTO `jobs` (`payload`, `retry_after`) VALUES (?, ?)

-- insert(3)
INSERT INTO `jobs` (`payload`, `retry_after`) VALUES (?, ?), (?, ?), (?, ?)

-- insertID
INSERT INTO `jobs` (`payload`, `retry_after`) VALUES (?, ?) RETURNING `id`
