package dbtest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/serverless-osb/broker/internal/waittest"
)

// CA is a certificate authority of a test's own, which no RDS bundle holds.
type CA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	// PEM is its certificate, as a bundle holds it.
	PEM []byte
}

// NewCA makes a certificate authority named name.
func NewCA(tb testing.TB, name string) *CA {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &CA{cert: cert, key: key, PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// ServerCertificate is a certificate ca signs for a server, and its key,
// both PEM.
type ServerCertificate struct{ Cert, Key []byte }

// Issue signs a server certificate for names (host names, or IP
// addresses).
func (ca *CA) Issue(tb testing.TB, names ...string) ServerCertificate {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: names[0]},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	for _, n := range names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	return ServerCertificate{Cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		Key: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER})}
}

// postgresSuperPassword is the superuser's password Postgres gives the
// servers it starts (initdb's pwfile there).
const postgresSuperPassword = "superuser-password-for-tests"

// ServePostgresTLS turns TLS on in the running PostgreSQL server s (or
// swaps its certificate) with c, as RDS serves it, and waits until the
// server presents c. PostgreSQL reloads ssl and its files on
// pg_reload_conf, so the server keeps running.
func ServePostgresTLS(tb testing.TB, s Server, c ServerCertificate) {
	tb.Helper()
	dir, err := os.MkdirTemp("", "dbtest-tls")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	certFile, keyFile := filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, c.Cert, 0o644); err != nil {
		tb.Fatal(err)
	}
	// PostgreSQL refuses a key that others can read, or that is not its own.
	if err := os.WriteFile(keyFile, c.Key, 0o600); err != nil {
		tb.Fatal(err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Fatal(err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, f := range []string{dir, certFile, keyFile} {
			if err := os.Chown(f, uid, gid); err != nil {
				tb.Fatal(err)
			}
		}
	}
	ctx, cancel := waittest.Context(tb)
	defer cancel()
	super := Server{Host: s.Host, Port: s.Port, Database: "postgres", MasterUser: "postgres", MasterPassword: postgresSuperPassword}
	conn, err := PgConnect(ctx, super, super.MasterUser, super.MasterPassword)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, q := range []string{
		"ALTER SYSTEM SET ssl_cert_file = '" + certFile + "'",
		"ALTER SYSTEM SET ssl_key_file = '" + keyFile + "'",
		"ALTER SYSTEM SET ssl = on",
		"SELECT pg_reload_conf()",
	} {
		if _, err := conn.Exec(ctx, q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	block, _ := pem.Decode(c.Cert)
	waittest.Until(tb, func() error {
		cfg, err := pgx.ParseConfig("")
		if err != nil {
			return err
		}
		var presented []byte
		cfg.Host, cfg.Port, cfg.Database, cfg.User, cfg.Password = s.Host, uint16(s.Port), s.Database, s.MasterUser, s.MasterPassword
		cfg.Fallbacks = nil
		// Only to see which certificate the server presents now.
		cfg.TLSConfig = &tls.Config{InsecureSkipVerify: true, VerifyConnection: func(cs tls.ConnectionState) error {
			presented = cs.PeerCertificates[0].Raw
			return nil
		}}
		c, err := pgx.ConnectConfig(ctx, cfg)
		if err != nil {
			if strings.Contains(err.Error(), "refused TLS") {
				return errors.New("the server serves no TLS yet")
			}
			return err
		}
		c.Close(ctx)
		if !bytes.Equal(presented, block.Bytes) {
			return fmt.Errorf("the server presents another certificate still")
		}
		return nil
	})
}
