package dbusers

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/go-sql-driver/mysql"
)

// MySQL makes the users of one MySQL or MariaDB server. Account names and
// passwords are string literals the driver escapes (client-side
// interpolation, which follows the server's NO_BACKSLASH_ESCAPES); database
// names are quoted identifiers, their `_` escaped in GRANTs, where it would
// otherwise match any character.
//
// An owner user has a database named after itself; readwrite and readonly
// users have rights on the application's database (Database). MySQL's
// objects have no owner, so Reassign keeps an owner's database, which the
// master reaches, and Drop drops it.
type MySQL struct {
	db       *sql.DB
	database string
}

var _ Engine = (*MySQL)(nil)

// OpenMySQL connects as the master user; c.Database is the application's.
func OpenMySQL(ctx context.Context, c Conn) (*MySQL, error) {
	if err := checkSchema("database", c.Database); err != nil {
		return nil, err
	}
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd = c.User, string(c.Password)
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	cfg.InterpolateParams = true
	cfg.TLS = c.TLS
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("mysql config: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to mysql %s: %w", cfg.Addr, err)
	}
	return &MySQL{db: db, database: c.Database}, nil
}

// Close ends the master's session.
func (m *MySQL) Close() error { return m.db.Close() }

// Create makes the user or brings it to u's password and privileges.
func (m *MySQL) Create(ctx context.Context, u User) error {
	if err := u.Check(); err != nil {
		return err
	}
	steps := []mysqlStmt{
		{"CREATE USER IF NOT EXISTS ?@'%' IDENTIFIED BY ?", []any{u.Name, string(u.Password)}},
		{"ALTER USER ?@'%' IDENTIFIED BY ? ACCOUNT UNLOCK", []any{u.Name, string(u.Password)}},
		// A user made again with other privileges loses the old ones.
		{"REVOKE ALL PRIVILEGES, GRANT OPTION FROM ?@'%'", []any{u.Name}},
	}
	switch u.Privileges {
	case Owner:
		steps = append(steps,
			mysqlStmt{"CREATE DATABASE IF NOT EXISTS " + quoteMySQL(u.Name), nil},
			mysqlStmt{"GRANT " + ownerGrants + " ON " + grantDatabase(u.Name) + ".* TO ?@'%'", []any{u.Name}})
	case ReadWrite:
		steps = append(steps, mysqlStmt{"GRANT SELECT, INSERT, UPDATE, DELETE, CREATE TEMPORARY TABLES ON " +
			grantDatabase(m.database) + ".* TO ?@'%'", []any{u.Name}})
	case ReadOnly:
		steps = append(steps, mysqlStmt{"GRANT SELECT ON " + grantDatabase(m.database) + ".* TO ?@'%'", []any{u.Name}})
	}
	if err := m.run(ctx, steps); err != nil {
		return fmt.Errorf("create mysql user %s: %w", u.Name, err)
	}
	return nil
}

// ownerGrants are a database's privileges, named: ALL names more than an RDS
// master holds (MariaDB's DELETE HISTORY), and one grants only what one has.
const ownerGrants = "SELECT, INSERT, UPDATE, DELETE, CREATE, DROP, REFERENCES, INDEX, ALTER, " +
	"CREATE TEMPORARY TABLES, LOCK TABLES, EXECUTE, CREATE VIEW, SHOW VIEW, CREATE ROUTINE, " +
	"ALTER ROUTINE, EVENT, TRIGGER"

// Delete locks the account, ends its sessions and drops it, with its own
// database unless mode is Reassign.
func (m *MySQL) Delete(ctx context.Context, name string, mode OnDelete) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := CheckMode(mode); err != nil {
		return err
	}
	if err := m.delete(ctx, name, mode); err != nil {
		return fmt.Errorf("delete mysql user %s: %w", name, err)
	}
	return nil
}

func (m *MySQL) delete(ctx context.Context, name string, mode OnDelete) error {
	var n int
	if err := m.db.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = '%'", name).Scan(&n); err != nil {
		return fmt.Errorf("look up the user: %w", err)
	}
	if n > 0 {
		if err := m.run(ctx, []mysqlStmt{{"ALTER USER ?@'%' ACCOUNT LOCK", []any{name}}}); err != nil {
			return err
		}
		if err := m.endSessions(ctx, name); err != nil {
			return err
		}
	}
	steps := []mysqlStmt{{"DROP USER IF EXISTS ?@'%'", []any{name}}}
	if mode == Drop {
		steps = append(steps, mysqlStmt{"DROP DATABASE IF EXISTS " + quoteMySQL(name), nil})
	}
	return m.run(ctx, steps)
}

// endSessions kills the user's connections: DROP USER leaves them open. On
// RDS, whose master may not KILL another user's thread, mysql.rds_kill does.
func (m *MySQL) endSessions(ctx context.Context, name string) error {
	rows, err := m.db.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", name)
	if err != nil {
		return fmt.Errorf("list the user's sessions: %w", err)
	}
	var ids []int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("list the user's sessions: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("list the user's sessions: %w", err)
	}
	for _, id := range ids {
		_, err := m.db.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10))
		var my *mysql.MySQLError
		switch {
		case err == nil:
		case errors.As(err, &my) && my.Number == errNoSuchThread:
		case errors.As(err, &my) && my.Number == errNotOwner:
			if _, err := m.db.ExecContext(ctx, "CALL mysql.rds_kill(?)", id); err != nil {
				return fmt.Errorf("end session %d: %w", id, err)
			}
		default:
			return fmt.Errorf("end session %d: %w", id, err)
		}
	}
	return nil
}

// MySQL's error numbers: ER_NO_SUCH_THREAD (the session ended meanwhile) and
// ER_KILL_DENIED_ERROR.
const (
	errNoSuchThread = 1094
	errNotOwner     = 1095
)

type mysqlStmt struct {
	query string
	args  []any
}

func (m *MySQL) run(ctx context.Context, steps []mysqlStmt) error {
	for _, s := range steps {
		if _, err := m.db.ExecContext(ctx, s.query, s.args...); err != nil {
			// The query, not its arguments: one may be a password.
			return fmt.Errorf("%s: %w", s.query, err)
		}
	}
	return nil
}

// quoteMySQL quotes an identifier.
func quoteMySQL(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// grantDatabase quotes a database name for GRANT, where _ and % are
// wildcards: osb_a would also grant on osbXa.
func grantDatabase(name string) string {
	r := strings.NewReplacer(`\`, `\\`, `_`, `\_`, `%`, `\%`)
	return quoteMySQL(r.Replace(name))
}
