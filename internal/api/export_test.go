package api

// For the contract tests (package api_test, which can start a real broker):
// the decode and the request body of each endpoint whose request carries
// OSB fields.
var (
	DecodeProvision = decodeProvision
	DecodeUpdate    = decodeUpdate
	DecodeBind      = decodeBind
)

type (
	ProvisionBody = provisionBody
	UpdateBody    = updateBody
	BindBody      = bindBody
)
