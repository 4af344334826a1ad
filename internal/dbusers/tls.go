package dbusers

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
)

// BundleFile is the RDS certificate bundle's file beside the function's
// bootstrap (make rds-ca-bundle fetches it, make build bundles it).
const BundleFile = "rds-ca-bundle.pem"

// ErrNoBundle is why the handler refuses every connection when the
// function was built without the RDS certificate bundle: the master's
// password is never sent to a server the handler cannot authenticate.
var ErrNoBundle = errors.New("the function has no RDS certificate bundle (" + BundleFile +
	", which make build bundles after make rds-ca-bundle fetched it): it connects to no database it cannot verify")

// VerifyingTLS is the TLS the handler reaches databases with: TLS 1.2 or
// later, the server's certificate chained to one of bundle's (the RDS
// certificate authorities) and naming the host the handler dialled (the
// instance's endpoint; Handler.master sets ServerName per request).
func VerifyingTLS(bundle []byte) (*tls.Config, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		return nil, errors.New("the RDS certificate bundle holds no PEM certificate")
	}
	return &tls.Config{MinVersion: tls.VersionTLS12, RootCAs: pool}, nil
}
