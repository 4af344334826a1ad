package dbtest

import (
	"fmt"
	"net"
	"testing"

	"github.com/serverless-osb/broker/internal/serverport"
	"github.com/serverless-osb/broker/internal/waittest"
)

// firstPortTaken makes the next server's first port taken: port, then free
// ones.
func firstPortTaken(t *testing.T, port int) *int {
	pick := serverport.Pick
	t.Cleanup(func() { serverport.Pick = pick })
	calls := 0
	serverport.Pick = func() (int, error) {
		if calls++; calls == 1 {
			return port, nil
		}
		return pick()
	}
	return &calls
}

// listening occupies a free loopback port, as another program would.
func listening(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l.Addr().(*net.TCPAddr).Port
}

// TestAServerWhosePortIsTakenTakesAnother: a port found free may be taken
// before the server binds it — by another test's server with the same
// credentials. The server a test gets must be its own: before serverport,
// Postgres answered with the other server's port, and the test worked on
// the other test's database.
func TestAServerWhosePortIsTakenTakesAnother(t *testing.T) {
	t.Run("postgres", func(t *testing.T) {
		other := Postgres(t)
		ctx, cancel := waittest.Context(t)
		defer cancel()
		c, err := PgConnect(ctx, other, other.MasterUser, other.MasterPassword)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "CREATE TABLE others (x int)"); err != nil {
			t.Fatal(err)
		}
		calls := firstPortTaken(t, other.Port)
		s := Postgres(t)
		if *calls < 2 || s.Port == other.Port {
			t.Fatalf("the server is on port %d after %d ports, want another than the taken %d", s.Port, *calls, other.Port)
		}
		mine, err := PgConnect(ctx, s, s.MasterUser, s.MasterPassword)
		if err != nil {
			t.Fatal(err)
		}
		defer mine.Close(ctx)
		var n int
		if err := mine.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 'others'").Scan(&n); err != nil || n != 0 {
			t.Fatalf("the test's server holds the other server's table (%d, %v)", n, err)
		}
	})
	// MariaDB and redis-server with their first port held by a listener.
	for _, server := range []struct {
		name  string
		start func(testing.TB) Server
		ping  func(Server) error
	}{
		{"mariadb", MariaDB, func(s Server) error {
			db, err := MySQLConnect(s, s.MasterUser, s.MasterPassword, s.Database)
			if err != nil {
				return err
			}
			defer db.Close()
			return db.Ping()
		}},
		{"redis", Redis, func(s Server) error {
			c, err := RedisConnect(s)
			if err != nil {
				return err
			}
			defer c.Close()
			if got, err := c.Do("PING"); err != nil || got != "PONG" {
				return fmt.Errorf("PING = %q, %v", got, err)
			}
			return nil
		}},
	} {
		t.Run(server.name, func(t *testing.T) {
			taken := listening(t)
			calls := firstPortTaken(t, taken)
			s := server.start(t)
			if *calls < 2 || s.Port == taken {
				t.Fatalf("the server is on port %d after %d ports, want another than the taken %d", s.Port, *calls, taken)
			}
			if err := server.ping(s); err != nil {
				t.Fatal(err)
			}
		})
	}
}
