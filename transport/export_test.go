package transport

// SetBulkMin makes transfers of n bytes or more take the direct connection of a Conn made through the
// keeper, for a test; it returns what puts the size back.
func SetBulkMin(n int64) (restore func()) {
	old := bulkMin
	bulkMin = n
	return func() { bulkMin = old }
}
