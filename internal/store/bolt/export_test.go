package bolt

// ShowKey is showKey, for the package's black-box tests: a key as layout 3
// wrote it.
var ShowKey = showKey
