package dbusers_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/serverless-osb/broker/internal/dbtest"
	"github.com/serverless-osb/broker/internal/dbusers"
	"github.com/serverless-osb/broker/internal/waittest"
)

// session is one open connection of a user.
type session interface {
	exec(ctx context.Context, q string) error
	close()
}

// engine is what the tests need of one kind of server: how to start it, the
// Engine under test on it, and how a user logs in.
type engine struct {
	name  string
	start func(testing.TB) dbtest.Server
	open  func(context.Context, dbtest.Server) (dbusers.Engine, error)
	login func(context.Context, dbtest.Server, string, string) (session, error)
	// owner returns who owns a table (PostgreSQL), or "" where objects have
	// no owner (MySQL).
	owner func(context.Context, dbtest.Server, string, string) (string, error)
}

var engines = []engine{
	{
		name:  "postgres",
		start: dbtest.Postgres,
		open: func(ctx context.Context, s dbtest.Server) (dbusers.Engine, error) {
			return dbusers.OpenPostgres(ctx, conn(s), "app")
		},
		login: func(ctx context.Context, s dbtest.Server, user, password string) (session, error) {
			c, err := dbtest.PgConnect(ctx, s, user, password)
			if err != nil {
				return nil, err
			}
			return pgSession{c}, nil
		},
		owner: func(ctx context.Context, s dbtest.Server, schema, table string) (string, error) {
			c, err := dbtest.PgConnect(ctx, s, s.MasterUser, s.MasterPassword)
			if err != nil {
				return "", err
			}
			defer c.Close(ctx)
			var owner string
			err = c.QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE schemaname = $1 AND tablename = $2", schema, table).Scan(&owner)
			return owner, err
		},
	},
	{
		name:  "mariadb",
		start: dbtest.MariaDB,
		open: func(ctx context.Context, s dbtest.Server) (dbusers.Engine, error) {
			return dbusers.OpenMySQL(ctx, conn(s))
		},
		login: func(ctx context.Context, s dbtest.Server, user, password string) (session, error) {
			db, err := dbtest.MySQLConnect(s, user, password, "")
			if err != nil {
				return nil, err
			}
			c, err := db.Conn(ctx)
			if err != nil {
				db.Close()
				return nil, err
			}
			return mySession{db, c}, nil
		},
		owner: func(context.Context, dbtest.Server, string, string) (string, error) { return "", nil },
	},
}

func conn(s dbtest.Server) dbusers.Conn {
	return dbusers.Conn{Host: s.Host, Port: s.Port, Database: s.Database, User: s.MasterUser, Password: dbusers.Password(s.MasterPassword)}
}

type pgSession struct{ c *pgx.Conn }

func (s pgSession) exec(ctx context.Context, q string) error {
	_, err := s.c.Exec(ctx, q)
	return err
}
func (s pgSession) close() { s.c.Close(context.Background()) }

type mySession struct {
	db *sql.DB
	c  *sql.Conn
}

func (s mySession) exec(ctx context.Context, q string) error {
	_, err := s.c.ExecContext(ctx, q)
	return err
}
func (s mySession) close() { s.c.Close(); s.db.Close() }

// fixture is one server, its Engine, and the master's session.
type fixture struct {
	t      *testing.T
	e      engine
	s      dbtest.Server
	users  dbusers.Engine
	master session
	ctx    context.Context
}

func newFixture(t *testing.T, e engine, s dbtest.Server) *fixture {
	t.Helper()
	ctx, cancel := waittest.Context(t)
	t.Cleanup(cancel)
	users, err := e.open(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { users.Close() })
	master, err := e.login(ctx, s, s.MasterUser, s.MasterPassword)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(master.close)
	return &fixture{t: t, e: e, s: s, users: users, master: master, ctx: ctx}
}

// create makes a user with a password that needs quoting everywhere.
func (f *fixture) create(name string, p dbusers.Privileges) (dbusers.User, session) {
	f.t.Helper()
	u := dbusers.User{Name: name, Password: dbusers.Password(`p'w"d\%_` + name), Privileges: p}
	if err := f.users.Create(f.ctx, u); err != nil {
		f.t.Fatal(err)
	}
	s, err := f.e.login(f.ctx, f.s, u.Name, string(u.Password))
	if err != nil {
		f.t.Fatalf("%s cannot log in: %v", name, err)
	}
	f.t.Cleanup(s.close)
	return u, s
}

func (f *fixture) may(who string, s session, q string) {
	f.t.Helper()
	if err := s.exec(f.ctx, q); err != nil {
		f.t.Errorf("%s may %s, but: %v", who, q, err)
	}
}

func (f *fixture) mayNot(who string, s session, q string) {
	f.t.Helper()
	if err := s.exec(f.ctx, q); err == nil {
		f.t.Errorf("%s may not %s, but did", who, q)
	}
}

func (f *fixture) cannotLogIn(u dbusers.User) {
	f.t.Helper()
	if s, err := f.e.login(f.ctx, f.s, u.Name, string(u.Password)); err == nil {
		s.close()
		f.t.Errorf("%s still logs in", u.Name)
	}
}

func aBindingsUserMayDoWhatItsPrivilegesSayAndNothingMore(t *testing.T, f *fixture) {
	_, owner := f.create("osb_owner1", dbusers.Owner)
	_, other := f.create("osb_owner2", dbusers.Owner)
	_, rw := f.create("osb_rw", dbusers.ReadWrite)
	_, ro := f.create("osb_ro", dbusers.ReadOnly)
	// The master's table in the application's schema, made after the
	// users: the default privileges cover it.
	f.may("the master", f.master, "CREATE TABLE app.items (id int)")
	f.may("the master", f.master, "INSERT INTO app.items VALUES (1)")

	f.may("an owner", owner, "CREATE TABLE osb_owner1.notes (id int)")
	f.may("an owner", owner, "INSERT INTO osb_owner1.notes VALUES (1)")
	if who, err := f.e.owner(f.ctx, f.s, "osb_owner1", "notes"); err != nil || (who != "" && who != "osb_owner1") {
		t.Errorf("the owner's table belongs to %q (%v), want osb_owner1", who, err)
	}
	f.mayNot("an owner", owner, "SELECT * FROM app.items")
	f.mayNot("an owner", owner, "CREATE TABLE app.mine (id int)")
	f.mayNot("another owner", other, "SELECT * FROM osb_owner1.notes")
	f.mayNot("another owner", other, "CREATE TABLE osb_owner1.theirs (id int)")

	f.may("readwrite", rw, "SELECT * FROM app.items")
	f.may("readwrite", rw, "INSERT INTO app.items VALUES (2)")
	f.may("readwrite", rw, "UPDATE app.items SET id = 3 WHERE id = 2")
	f.may("readwrite", rw, "DELETE FROM app.items WHERE id = 3")
	f.mayNot("readwrite", rw, "CREATE TABLE app.mine (id int)")
	f.mayNot("readwrite", rw, "DROP TABLE app.items")
	f.mayNot("readwrite", rw, "CREATE TABLE osb_owner1.mine (id int)")
	f.mayNot("readwrite", rw, "SELECT * FROM osb_owner1.notes")

	f.may("readonly", ro, "SELECT * FROM app.items")
	f.mayNot("readonly", ro, "INSERT INTO app.items VALUES (4)")
	f.mayNot("readonly", ro, "DELETE FROM app.items")
	f.mayNot("readonly", ro, "CREATE TABLE app.mine (id int)")
	f.mayNot("readonly", ro, "SELECT * FROM osb_owner1.notes")
}

func anOwnersNameIsNoPatternOfOtherDatabases(t *testing.T, f *fixture) {
	// In a MySQL GRANT, _ matches any character: a grant on osb_a.* unescaped
	// would also grant on osbxa.
	_, owner := f.create("osb_a", dbusers.Owner)
	if f.e.name == "mariadb" {
		f.may("the master", f.master, "CREATE DATABASE osbxa")
	} else {
		f.may("the master", f.master, "CREATE SCHEMA osbxa")
	}
	f.mayNot("the owner of osb_a", owner, "CREATE TABLE osbxa.t (id int)")
}

func unbindDropsTheUserWithWhatItOwns(t *testing.T, f *fixture) {
	u, s := f.create("osb_gone", dbusers.Owner)
	f.may("the owner", s, "CREATE TABLE osb_gone.notes (id int)")
	if err := f.users.Delete(f.ctx, u.Name, dbusers.Drop); err != nil {
		t.Fatal(err)
	}
	f.mayNot("an unbound user's open session", s, "SELECT 1")
	f.cannotLogIn(u)
	f.mayNot("the master", f.master, "SELECT * FROM osb_gone.notes")
	if err := f.users.Delete(f.ctx, u.Name, dbusers.Drop); err != nil {
		t.Errorf("a delete sent again: %v", err)
	}
}

func unbindWithReassignKeepsTheDataForTheMaster(t *testing.T, f *fixture) {
	u, s := f.create("osb_kept", dbusers.Owner)
	f.may("the owner", s, "CREATE TABLE osb_kept.notes (id int)")
	f.may("the owner", s, "INSERT INTO osb_kept.notes VALUES (7)")
	if err := f.users.Delete(f.ctx, u.Name, dbusers.Reassign); err != nil {
		t.Fatal(err)
	}
	f.cannotLogIn(u)
	f.may("the master", f.master, "SELECT * FROM osb_kept.notes WHERE id = 7")
	if who, err := f.e.owner(f.ctx, f.s, "osb_kept", "notes"); err != nil || (who != "" && who != f.s.MasterUser) {
		t.Errorf("the table belongs to %q (%v), want the master", who, err)
	}
}

func rotationLeavesThePredecessorWorkingUntilItsUnbind(t *testing.T, f *fixture) {
	old, oldSession := f.create("osb_old", dbusers.ReadWrite)
	f.may("the master", f.master, "CREATE TABLE app.rotation (id int)")
	_, next := f.create("osb_next", dbusers.ReadWrite)
	f.may("the predecessor", oldSession, "INSERT INTO app.rotation VALUES (1)")
	f.may("the successor", next, "INSERT INTO app.rotation VALUES (2)")
	if err := f.users.Delete(f.ctx, old.Name, dbusers.Drop); err != nil {
		t.Fatal(err)
	}
	f.cannotLogIn(old)
	f.may("the successor", next, "INSERT INTO app.rotation VALUES (3)")
	f.may("the master", f.master, "DELETE FROM app.rotation WHERE id = 2")
}

func aCreateSentAgainBringsTheUserToItsPasswordAndPrivileges(t *testing.T, f *fixture) {
	u, first := f.create("osb_again", dbusers.ReadWrite)
	f.may("the master", f.master, "CREATE TABLE app.again (id int)")
	f.may("readwrite", first, "INSERT INTO app.again VALUES (1)")
	again := dbusers.User{Name: u.Name, Password: "another-password", Privileges: dbusers.ReadOnly}
	if err := f.users.Create(f.ctx, again); err != nil {
		t.Fatal(err)
	}
	if err := f.users.Create(f.ctx, again); err != nil {
		t.Fatalf("the same create sent again: %v", err)
	}
	f.cannotLogIn(u)
	s, err := f.e.login(f.ctx, f.s, again.Name, string(again.Password))
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	f.may("readonly", s, "SELECT * FROM app.again")
	f.mayNot("readonly after readwrite", s, "INSERT INTO app.again VALUES (2)")
}

func aDeleteOfAUserNeverMadeChangesNothing(t *testing.T, f *fixture) {
	for _, mode := range []dbusers.OnDelete{dbusers.Drop, dbusers.Reassign} {
		if err := f.users.Delete(f.ctx, "osb_never", mode); err != nil {
			t.Errorf("delete (%s): %v", mode, err)
		}
	}
}

func namesAndModesThatNoStatementMayCarryAreRefused(t *testing.T, f *fixture) {
	for _, name := range []string{"", "Osb", "osb-x", `osb"; DROP ROLE app_admin; --`, "osb`x", strings.Repeat("a", 33)} {
		u := dbusers.User{Name: name, Password: "x", Privileges: dbusers.Owner}
		if err := f.users.Create(f.ctx, u); err == nil {
			t.Errorf("create %q: no error", name)
		}
		if err := f.users.Delete(f.ctx, name, dbusers.Drop); err == nil {
			t.Errorf("delete %q: no error", name)
		}
	}
	if err := f.users.Create(f.ctx, dbusers.User{Name: "osb_x", Password: "x", Privileges: "admin"}); err == nil {
		t.Error("privileges admin: no error")
	}
	if err := f.users.Delete(f.ctx, "osb_x", "cascade"); err == nil {
		t.Error("on delete cascade: no error")
	}
}

func TestUserNamesAreStablePerStackAndValid(t *testing.T) {
	a := dbusers.UserName("arn:aws:cloudformation:eu-west-1:123456789012:stack/osb-b1/1", "DatabaseUser")
	if a != dbusers.UserName("arn:aws:cloudformation:eu-west-1:123456789012:stack/osb-b1/1", "DatabaseUser") {
		t.Error("the same stack and resource name two users")
	}
	b := dbusers.UserName("arn:aws:cloudformation:eu-west-1:123456789012:stack/osb-b2/2", "DatabaseUser")
	if a == b {
		t.Error("two stacks share a user name")
	}
	for _, n := range []string{a, b} {
		if err := dbusers.CheckName(n); err != nil {
			t.Error(err)
		}
	}
	if got := fmt.Sprint(dbusers.Password("secret")); got != "[REDACTED]" {
		t.Errorf("a password prints as %q", got)
	}
}

// scenarios run, each, on one server per engine that TestDatabaseUsers starts
// (a server's start is most of a scenario's time).
var scenarios = []struct {
	name string
	run  func(*testing.T, *fixture)
}{
	{"a binding's user may do what its privileges say and nothing more", aBindingsUserMayDoWhatItsPrivilegesSayAndNothingMore},
	{"an owner's name is no pattern of other databases", anOwnersNameIsNoPatternOfOtherDatabases},
	{"unbind drops the user with what it owns", unbindDropsTheUserWithWhatItOwns},
	{"unbind with reassign keeps the data for the master", unbindWithReassignKeepsTheDataForTheMaster},
	{"rotation leaves the predecessor working until its unbind", rotationLeavesThePredecessorWorkingUntilItsUnbind},
	{"a create sent again brings the user to its password and privileges", aCreateSentAgainBringsTheUserToItsPasswordAndPrivileges},
	{"a delete of a user never made changes nothing", aDeleteOfAUserNeverMadeChangesNothing},
	{"names and modes that no statement may carry are refused", namesAndModesThatNoStatementMayCarryAreRefused},
}

func TestDatabaseUsers(t *testing.T) {
	for _, e := range engines {
		t.Run(e.name, func(t *testing.T) {
			s := e.start(t)
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, newFixture(t, e, s)) })
			}
		})
	}
}
