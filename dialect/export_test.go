package dialect

// RememberedSessions counts the driver connections whose session the package remembers.
func RememberedSessions() int {
	sessions.mu.Lock()
	defer sessions.mu.Unlock()
	return len(sessions.m)
}
