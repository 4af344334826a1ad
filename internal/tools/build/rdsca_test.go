package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/serverless-osb/broker/internal/dbtest"
	"github.com/serverless-osb/broker/internal/dbusers"
)

// TestTheDBUserBundleCarriesTheRDSCertificates: the fetched bundle goes
// beside the dbuser function's bootstrap; one without a certificate fails
// the build; none builds a function that refuses every database.
func TestTheDBUserBundleCarriesTheRDSCertificates(t *testing.T) {
	write := func(t *testing.T, pem []byte) (root, dir string) {
		root, dir = t.TempDir(), t.TempDir()
		if pem != nil {
			src := filepath.Join(root, RDSBundleSource)
			if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(src, pem, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return root, dir
	}
	t.Run("the bundle is copied", func(t *testing.T) {
		ca := dbtest.NewCA(t, "stand-in for the RDS CA")
		root, dir := write(t, ca.PEM)
		if err := bundleRDSCertificates(root, dir); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, dbusers.BundleFile))
		if err != nil || !bytes.Equal(got, ca.PEM) {
			t.Errorf("the bundled file: %q %v", got, err)
		}
	})
	t.Run("a bundle without a certificate fails the build", func(t *testing.T) {
		root, dir := write(t, []byte("<html>not found</html>"))
		if err := bundleRDSCertificates(root, dir); err == nil {
			t.Error("no error")
		}
	})
	t.Run("without one the function is built without it", func(t *testing.T) {
		root, dir := write(t, nil)
		if err := bundleRDSCertificates(root, dir); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, dbusers.BundleFile)); !os.IsNotExist(err) {
			t.Errorf("a bundle appeared: %v", err)
		}
	})
}
