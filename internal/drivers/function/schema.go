package function

import _ "embed"

// Schema is the protocol's JSON schema (protocol.schema.json): its $defs
// request and answer are what Request and Answer encode.
//
//go:embed protocol.schema.json
var Schema []byte
