package dbusers

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Conn says how to reach a database as its master user.
type Conn struct {
	Host     string
	Port     int
	Database string
	User     string
	Password Password
	// TLS is nil only in tests, on loopback.
	TLS *tls.Config
}

// Postgres makes the users of one PostgreSQL database. Statements are built by
// the server's format() (%I quotes an identifier, %L a literal), so no name
// or password is ever spliced into SQL by hand.
//
// The application's schema (Schema, owned by the master user) has two group
// roles, <schema>_readwrite and <schema>_readonly, which hold the rights on
// its tables and sequences, those the master creates later included (default
// privileges); a readwrite or readonly user is a member of one. An owner user
// has a schema named after itself. The master is made a member of each user,
// which REASSIGN OWNED and DROP OWNED require.
type Postgres struct {
	conn   *pgx.Conn
	schema string
}

var _ Engine = (*Postgres)(nil)

// OpenPostgres connects as the master user; schema is the application's.
func OpenPostgres(ctx context.Context, c Conn, schema string) (*Postgres, error) {
	if err := checkSchema("schema", schema); err != nil {
		return nil, err
	}
	cfg, err := pgx.ParseConfig("")
	if err != nil {
		return nil, fmt.Errorf("postgres config: %w", err)
	}
	cfg.Host, cfg.Port, cfg.Database = c.Host, uint16(c.Port), c.Database
	cfg.User, cfg.Password, cfg.TLSConfig = c.User, string(c.Password), c.TLS
	cfg.Fallbacks = nil
	cfg.RuntimeParams = map[string]string{"application_name": "serverless-osb-dbuser"}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to postgres %s:%d/%s: %w", c.Host, c.Port, c.Database, err)
	}
	return &Postgres{conn: conn, schema: schema}, nil
}

// Close ends the master's session.
func (p *Postgres) Close() error { return p.conn.Close(context.Background()) }

func (p *Postgres) groups() (readwrite, readonly string) {
	return p.schema + "_readwrite", p.schema + "_readonly"
}

// Create makes the user or brings it to u's password and privileges.
func (p *Postgres) Create(ctx context.Context, u User) error {
	if err := u.Check(); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, p.conn, func(tx pgx.Tx) error {
		if err := lock(ctx, tx); err != nil {
			return err
		}
		if err := p.shared(ctx, tx); err != nil {
			return err
		}
		exists, err := roleExists(ctx, tx, u.Name)
		if err != nil {
			return err
		}
		create := "CREATE ROLE %I WITH LOGIN PASSWORD %L"
		if exists {
			create = "ALTER ROLE %I WITH LOGIN PASSWORD %L"
		}
		rw, ro := p.groups()
		steps := []stmt{
			{create, []any{u.Name, string(u.Password)}},
			{"GRANT %I TO CURRENT_USER", []any{u.Name}},
			// A user made again with other privileges loses the old ones.
			{"REVOKE %I, %I FROM %I", []any{rw, ro, u.Name}},
		}
		switch u.Privileges {
		case Owner:
			steps = append(steps,
				stmt{"CREATE SCHEMA IF NOT EXISTS %I AUTHORIZATION %I", []any{u.Name, u.Name}},
				stmt{"ALTER ROLE %I SET search_path = %I", []any{u.Name, u.Name}})
		case ReadWrite:
			steps = append(steps,
				stmt{"GRANT %I TO %I", []any{rw, u.Name}},
				stmt{"ALTER ROLE %I SET search_path = %I", []any{u.Name, p.schema}})
		case ReadOnly:
			steps = append(steps,
				stmt{"GRANT %I TO %I", []any{ro, u.Name}},
				stmt{"ALTER ROLE %I SET search_path = %I", []any{u.Name, p.schema}})
		}
		return run(ctx, tx, steps)
	})
	if err != nil {
		return fmt.Errorf("create postgres user %s: %w", u.Name, err)
	}
	return nil
}

// shared makes the application's schema and its group roles, and gives the
// roles their rights (again: tables made since are covered too).
func (p *Postgres) shared(ctx context.Context, tx pgx.Tx) error {
	rw, ro := p.groups()
	for _, g := range []string{rw, ro} {
		exists, err := roleExists(ctx, tx, g)
		if err != nil {
			return err
		}
		if !exists {
			if err := run(ctx, tx, []stmt{{"CREATE ROLE %I NOLOGIN", []any{g}}}); err != nil {
				return err
			}
		}
	}
	s := p.schema
	steps := []stmt{
		{"CREATE SCHEMA IF NOT EXISTS %I", []any{s}},
		{"GRANT USAGE ON SCHEMA %I TO %I, %I", []any{s, rw, ro}},
		{"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I", []any{s, rw}},
		{"GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I TO %I", []any{s, rw}},
		{"GRANT SELECT ON ALL TABLES IN SCHEMA %I TO %I", []any{s, ro}},
		{"GRANT SELECT ON ALL SEQUENCES IN SCHEMA %I TO %I", []any{s, ro}},
		{"ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO %I", []any{s, rw}},
		{"ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO %I", []any{s, rw}},
		{"ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO %I", []any{s, ro}},
		{"ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON SEQUENCES TO %I", []any{s, ro}},
	}
	if err := run(ctx, tx, steps); err != nil {
		return err
	}
	// Before PostgreSQL 15 every role may create in public: take that away
	// where the master may (it owns public, or is its owner's member), so a
	// readwrite or readonly user creates nothing anywhere.
	var mayRevoke bool
	err := tx.QueryRow(ctx, `SELECT pg_has_role(nspowner, 'USAGE') AND has_schema_privilege('public', 'CREATE')
		FROM pg_namespace WHERE nspname = 'public'`).Scan(&mayRevoke)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the public schema's owner: %w", err)
	}
	if mayRevoke {
		return run(ctx, tx, []stmt{{"REVOKE CREATE ON SCHEMA public FROM PUBLIC", nil}})
	}
	return nil
}

// Delete ends the user's sessions and drops it, after dropping what it owns
// or reassigning that to the master.
func (p *Postgres) Delete(ctx context.Context, name string, mode OnDelete) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := CheckMode(mode); err != nil {
		return err
	}
	// No new session first (committed), then none left: the unbound app
	// loses its access now, not when it next disconnects.
	var exists bool
	err := pgx.BeginFunc(ctx, p.conn, func(tx pgx.Tx) error {
		if err := lock(ctx, tx); err != nil {
			return err
		}
		var err error
		if exists, err = roleExists(ctx, tx, name); err != nil || !exists {
			return err
		}
		return run(ctx, tx, []stmt{
			{"GRANT %I TO CURRENT_USER", []any{name}},
			{"ALTER ROLE %I WITH NOLOGIN", []any{name}},
		})
	})
	if err == nil && exists {
		if _, err = p.conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
			WHERE usename = $1 AND pid <> pg_backend_pid()`, name); err != nil {
			err = fmt.Errorf("end the user's sessions: %w", err)
		}
	}
	if err == nil && exists {
		err = pgx.BeginFunc(ctx, p.conn, func(tx pgx.Tx) error {
			if err := lock(ctx, tx); err != nil {
				return err
			}
			var steps []stmt
			if mode == Reassign {
				steps = append(steps, stmt{"REASSIGN OWNED BY %I TO CURRENT_USER", []any{name}})
			}
			// CASCADE: another user's view of a dropped table must not keep
			// the unbind failing forever.
			steps = append(steps,
				stmt{"DROP OWNED BY %I CASCADE", []any{name}},
				stmt{"DROP ROLE %I", []any{name}})
			return run(ctx, tx, steps)
		})
	}
	if err != nil {
		return fmt.Errorf("delete postgres user %s: %w", name, err)
	}
	return nil
}

// stmt is a statement for the server's format(), and its arguments.
type stmt struct {
	format string
	args   []any
}

// run builds each statement with format() on the server, then runs it.
func run(ctx context.Context, tx pgx.Tx, steps []stmt) error {
	for _, s := range steps {
		sql := s.format
		if len(s.args) > 0 {
			params := "$1"
			args := []any{s.format}
			for i, a := range s.args {
				params += fmt.Sprintf(", $%d::text", i+2)
				args = append(args, a)
			}
			if err := tx.QueryRow(ctx, "SELECT format("+params+")", args...).Scan(&sql); err != nil {
				return fmt.Errorf("format %q: %w", s.format, err)
			}
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			// The format, not the statement: it may hold a password.
			return fmt.Errorf("%s: %w", s.format, err)
		}
	}
	return nil
}

// lock serializes the handler's calls on one database: two bindings made at
// once would otherwise race to create the group roles.
func lock(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('serverless-osb dbusers'))"); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	return nil
}

func roleExists(ctx context.Context, tx pgx.Tx, name string) (bool, error) {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("look up role %s: %w", name, err)
	}
	return exists, nil
}
