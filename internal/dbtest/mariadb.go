package dbtest

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/serverless-osb/broker/internal/serverport"
	"github.com/serverless-osb/broker/internal/waittest"
)

// rdsMasterGrants are the privileges RDS for MySQL and MariaDB give the master
// user (no SUPER, no CONNECTION ADMIN: it kills other users' sessions with
// mysql.rds_kill).
const rdsMasterGrants = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, RELOAD, PROCESS, REFERENCES, INDEX, " +
	"ALTER, SHOW DATABASES, CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, REPLICATION SLAVE, " +
	"REPLICATION CLIENT, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, ALTER ROUTINE, CREATE USER, EVENT, TRIGGER"

// MariaDB starts a MariaDB server for tb, with a master user granted what
// RDS grants its master, and a stand-in of RDS's mysql.rds_kill procedure
// (defined by root, so it may kill any session, as RDS's does).
func MariaDB(tb testing.TB) Server {
	tb.Helper()
	install := find(tb, "mariadb-install-db", "mariadb-server")
	mariadbd := find(tb, "mariadbd", "mariadb-server", "/usr/sbin")
	p := newProcess(tb, "mysql")
	data := filepath.Join(p.dir, "data")
	account := []string{}
	if p.owner != nil {
		account = []string{"--user=mysql"}
	}
	p.runOnce("install.log", install, append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db"}, account...)...)
	socket := filepath.Join(p.dir, "mysqld.sock")
	// Its own log (a fresh one each attempt) says it is ready once it
	// listens on its port.
	signs := serverport.Signs{Listening: func(int) string { return "ready for connections" }, Taken: portTaken}
	port := p.start("mariadbd.log", signs, func(port int) (string, []string) {
		return mariadbd, append([]string{"--no-defaults", "--datadir=" + data,
			"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(port), "--socket=" + socket,
			"--pid-file=" + filepath.Join(p.dir, "mysqld.pid"), "--skip-log-bin",
			"--innodb-buffer-pool-size=16M", "--innodb-flush-log-at-trx-commit=0"}, account...)
	})

	root := mysql.NewConfig()
	root.User, root.Net, root.Addr = "root", "unix", socket
	p.ready("mariadbd.log", func(ctx context.Context) error {
		db, err := openMySQL(root)
		if err != nil {
			return err
		}
		defer db.Close()
		return db.PingContext(ctx)
	})
	db, err := openMySQL(root)
	if err != nil {
		tb.Fatal(err)
	}
	defer db.Close()
	ctx, cancel := waittest.Context(tb)
	defer cancel()
	for _, q := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", masterUser, masterPassword),
		fmt.Sprintf("GRANT %s ON *.* TO '%s'@'%%' WITH GRANT OPTION", rdsMasterGrants, masterUser),
		"CREATE DATABASE " + database,
		`CREATE PROCEDURE mysql.rds_kill(IN thread BIGINT) SQL SECURITY DEFINER
		 BEGIN SET @osb_kill = CONCAT('KILL CONNECTION ', thread); PREPARE k FROM @osb_kill; EXECUTE k; DEALLOCATE PREPARE k; END`,
		fmt.Sprintf("GRANT EXECUTE ON PROCEDURE mysql.rds_kill TO '%s'@'%%'", masterUser),
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			tb.Fatalf("%s: %v", q, err)
		}
	}
	return Server{Host: "127.0.0.1", Port: port, Database: database, MasterUser: masterUser, MasterPassword: masterPassword}
}

// MySQLConnect opens a pool on s as user, with database (may be empty), one
// session at a time.
func MySQLConnect(s Server, user, password, database string) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.DBName = user, password, database
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port))
	db, err := openMySQL(cfg)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return db, nil
}

func openMySQL(cfg *mysql.Config) (*sql.DB, error) {
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}
