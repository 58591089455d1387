-- insert(1)
INSERT INTO `jobs` (`id`, `payload`) VALUES (?, ?)

-- insert(3)
INSERT INTO `jobs` (`id`, `payload`) VALUES (?, ?), (?, ?), (?, ?)

-- insertID
INSERT INTO `jobs` (`id`, `payload`) VALUES (?, ?)
