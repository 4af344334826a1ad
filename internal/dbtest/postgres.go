package dbtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/serverless-osb/broker/internal/serverport"
	"github.com/serverless-osb/broker/internal/waittest"
)

// Postgres starts a PostgreSQL server for tb. Its master user is as RDS's is
// to the application: not a superuser, but allowed to create roles, and the
// owner of the application database.
func Postgres(tb testing.TB) Server {
	tb.Helper()
	dirs := []string{"/usr/lib/postgresql/*/bin"}
	initdb := find(tb, "initdb", "postgresql", dirs...)
	postgres := find(tb, "postgres", "postgresql", dirs...)
	p := newProcess(tb, "postgres")
	const superPassword = "superuser-password-for-tests"
	pwfile := filepath.Join(p.dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(superPassword+"\n"), 0o600); err != nil {
		tb.Fatal(err)
	}
	if p.owner != nil {
		if err := os.Chown(pwfile, int(p.owner.Uid), int(p.owner.Gid)); err != nil {
			tb.Fatal(err)
		}
	}
	data := filepath.Join(p.dir, "data")
	p.runOnce("initdb.log", initdb, "-D", data, "-U", "postgres", "--pwfile", pwfile,
		"--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--no-sync")
	signs := serverport.Signs{
		Listening: func(port int) string { return fmt.Sprintf(`listening on IPv4 address "127.0.0.1", port %d`, port) },
		Taken:     portTaken,
	}
	port := p.start("postgres.log", signs, func(port int) (string, []string) {
		return postgres, []string{"-D", data, "-h", "127.0.0.1", "-p", strconv.Itoa(port),
			"-k", p.dir, "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"}
	})
	s := Server{Host: "127.0.0.1", Port: port, Database: database, MasterUser: masterUser, MasterPassword: masterPassword}

	super := Server{Host: s.Host, Port: port, Database: "postgres", MasterUser: "postgres", MasterPassword: superPassword}
	p.ready("postgres.log", func(ctx context.Context) error {
		c, err := PgConnect(ctx, super, super.MasterUser, super.MasterPassword)
		if err == nil {
			c.Close(ctx)
		}
		return err
	})
	ctx, cancel := waittest.Context(tb)
	defer cancel()
	c, err := PgConnect(ctx, super, super.MasterUser, super.MasterPassword)
	if err != nil {
		tb.Fatal(err)
	}
	defer c.Close(ctx)
	for _, q := range []string{
		fmt.Sprintf("CREATE ROLE %s LOGIN CREATEROLE PASSWORD '%s'", masterUser, masterPassword),
		fmt.Sprintf("CREATE DATABASE %s OWNER %s", database, masterUser),
	} {
		if _, err := c.Exec(ctx, q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	return s
}

// PgConnect opens a session on s's database as user (on loopback, no TLS).
func PgConnect(ctx context.Context, s Server, user, password string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, err
	}
	cfg.Host, cfg.Port, cfg.Database = s.Host, uint16(s.Port), s.Database
	cfg.User, cfg.Password, cfg.TLSConfig, cfg.Fallbacks = user, password, nil, nil
	return pgx.ConnectConfig(ctx, cfg)
}
