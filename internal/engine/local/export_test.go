package local

// How restarted workflows' records wait to be written together, for tests.
const (
	BatchRecords = batchRecords
	BatchAge     = batchAge
)
