package dbusers_test

import (
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/cfn"

	"github.com/serverless-osb/broker/internal/dbtest"
	"github.com/serverless-osb/broker/internal/dbusers"
	"github.com/serverless-osb/broker/internal/mototest"
)

// TestTheHandlerConnectsOnlyToAServerItCanVerify runs the handler against
// a real PostgreSQL that serves TLS with a certificate of the test's own
// CA, as RDS serves its own: the handler, trusting a bundle without that
// CA (as the RDS bundle is to any other server), refuses to send the
// master's password; trusting it, it makes the user, but only when the
// certificate names the host it dialled; a server without TLS is refused;
// and a handler built without a bundle makes no user and says why, and
// its failed create leaves nothing for the rollback to drop.
func TestTheHandlerConnectsOnlyToAServerItCanVerify(t *testing.T) {
	h := newHandlerFixture(t, engines[0])
	ca, other := dbtest.NewCA(t, "the test's own CA"), dbtest.NewCA(t, "a CA that signed nothing here")
	trusting := func(bundle []byte) {
		t.Helper()
		cfg, err := dbusers.VerifyingTLS(bundle)
		if err != nil {
			t.Fatal(err)
		}
		h.handler.TLS, h.handler.Unavailable = cfg, nil
	}
	create := func(name string, props map[string]any) cfn.Response {
		t.Helper()
		props = clone(props)
		props["SecretArn"] = h.secret(mototest.Name("osb-"+name+"-db-user"), `{"password":"pw-`+name+`"}`)
		return h.request(cfn.RequestCreate, "", props)
	}
	refused := func(r cfn.Response, name, want string) {
		t.Helper()
		if r.Status != cfn.StatusFailed || !strings.Contains(r.Reason, want) {
			t.Errorf("create: %s %q, want FAILED with %q", r.Status, r.Reason, want)
		}
		if dbusers.CheckName(r.PhysicalResourceID) == nil {
			h.cannotLogIn(dbusers.User{Name: r.PhysicalResourceID, Password: dbusers.Password("pw-" + name)})
		}
	}

	t.Run("a server without TLS is refused", func(t *testing.T) {
		trusting(ca.PEM)
		refused(create("plain", h.props), "plain", "refused TLS")
	})

	dbtest.ServePostgresTLS(t, h.s, ca.Issue(t, "127.0.0.1"))
	t.Run("a server whose CA the bundle lacks is refused", func(t *testing.T) {
		trusting(other.PEM)
		refused(create("unknown", h.props), "unknown", "certificate signed by unknown authority")
	})
	t.Run("a certificate that names another host is refused", func(t *testing.T) {
		trusting(ca.PEM)
		props := clone(h.props)
		props["Host"] = "localhost"
		refused(create("misnamed", props), "misnamed", "localhost")
	})
	t.Run("a server the bundle vouches for, by the name dialled, gets its user", func(t *testing.T) {
		trusting(ca.PEM)
		r := create("verified", h.props)
		if r.Status != cfn.StatusSuccess {
			t.Fatalf("create: %s %s", r.Status, r.Reason)
		}
		s, err := engines[0].login(h.ctx, h.s, r.PhysicalResourceID, "pw-verified")
		if err != nil {
			t.Fatalf("the user cannot log in: %v", err)
		}
		s.close()
	})
	t.Run("without a bundle no user is made, and the rollback's delete is a no-op", func(t *testing.T) {
		h.handler.TLS, h.handler.Unavailable = nil, dbusers.ErrNoBundle
		r := create("unbundled", h.props)
		if r.Status != cfn.StatusFailed || !strings.Contains(r.Reason, "no RDS certificate bundle") || dbusers.CheckName(r.PhysicalResourceID) == nil {
			t.Fatalf("create: %s %s %q", r.Status, r.PhysicalResourceID, r.Reason)
		}
		if d := h.request(cfn.RequestDelete, r.PhysicalResourceID, h.props); d.Status != cfn.StatusSuccess {
			t.Errorf("the rollback's delete: %s %s", d.Status, d.Reason)
		}
	})
	t.Run("a bundle without a certificate is refused when the function starts", func(t *testing.T) {
		if _, err := dbusers.VerifyingTLS([]byte("not a certificate")); err == nil {
			t.Error("VerifyingTLS accepted a bundle without a certificate")
		}
	})
}
