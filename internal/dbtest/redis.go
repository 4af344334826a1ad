package dbtest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/serverless-osb/broker/internal/serverport"
)

// Redis starts a redis-server (7.0: the ACLs Valkey keeps) for tb, with
// ACLs on; its default user has no password and every right.
func Redis(tb testing.TB) Server {
	tb.Helper()
	server := find(tb, "redis-server", "redis-server", "/usr/bin")
	p := newProcess(tb, "redis")
	// Its own log (a fresh one each attempt) says it is ready once it
	// listens on its port ("Running mode=standalone, port=N." comes before
	// it binds the port).
	signs := serverport.Signs{Listening: func(int) string { return "Ready to accept connections" }, Taken: portTaken}
	port := p.start("redis.log", signs, func(port int) (string, []string) {
		return server, []string{"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", p.dir,
			"--save", "", "--appendonly", "no", "--protected-mode", "no",
			// DEBUG allowed, so that only the ACL refuses it to a binding.
			"--enable-debug-command", "yes"}
	})
	s := Server{Host: "127.0.0.1", Port: port}
	p.ready("redis.log", func(ctx context.Context) error {
		c, err := RedisConnect(s)
		if err == nil {
			_, err = c.Do("PING")
			c.Close()
		}
		return err
	})
	return s
}

// RedisConn is one connection, speaking RESP: enough for tests.
type RedisConn struct {
	c net.Conn
	r *bufio.Reader
}

// RedisConnect connects as the default user.
func RedisConnect(s Server) (*RedisConn, error) {
	c, err := net.DialTimeout("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)), 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &RedisConn{c: c, r: bufio.NewReader(c)}, nil
}

// Close closes the connection.
func (c *RedisConn) Close() error { return c.c.Close() }

// ErrRedis is a reply the server sent as an error.
var ErrRedis = errors.New("redis error")

// Do sends a command and reads its reply: a simple or bulk string, an
// integer as text, an array's elements joined by spaces, or an error
// wrapping ErrRedis.
func (c *RedisConn) Do(args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return c.read()
}

func (c *RedisConn) read() (string, error) {
	line, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("%w: %s", ErrRedis, line[1:])
	case '$':
		n, _ := strconv.Atoi(line[1:])
		if n < 0 {
			return "", nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, _ := strconv.Atoi(line[1:])
		var parts []string
		for range max(n, 0) {
			p, err := c.read()
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, " "), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
