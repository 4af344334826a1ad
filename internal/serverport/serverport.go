// Package serverport starts a test server on a free loopback port and knows
// that what listens there is its own. A port found free can be taken by
// another process before the server binds it; the server then exits (or
// logs that the port is taken) while another server answers on the port,
// maybe one with the same test credentials. So a server is taken as started
// only once its own log says it listens on its port, and a port found taken
// is given up for another.
package serverport

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Signs are what a server writes to its log.
type Signs struct {
	// Listening is the text the server logs once it listens on port.
	Listening func(port int) string
	// Taken are texts the server logs when its port is taken.
	Taken []string
}

// Server is one attempt to start a server on a port.
type Server struct {
	// Log is the file the server writes its log to.
	Log string
	// Ended, if not nil, is closed when the server process has ended.
	Ended <-chan struct{}
	// Stop ends the server; Start calls it when the port was taken.
	Stop func()
}

// MaxAttempts bounds the ports Start tries when each is taken before the
// server binds it.
const MaxAttempts = 10

// Pick returns a loopback port that was free a moment ago; a test replaces
// it to hand out a taken port.
var Pick = func() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// ErrEnded is returned when a server ended without saying that it listens or
// that its port is taken.
var ErrEnded = errors.New("the server ended")

// Start picks a port, starts the server on it with start, and waits (at most
// timeout per attempt) until the server's log says it listens on that port.
// When the log says the port is taken, the server is stopped and another
// port tried. It returns the port of the server that listens.
func Start(signs Signs, timeout time.Duration, start func(port int) (Server, error)) (int, error) {
	for attempt := 1; ; attempt++ {
		port, err := Pick()
		if err != nil {
			return 0, err
		}
		s, err := start(port)
		if err != nil {
			return 0, err
		}
		listening, err := wait(s, signs, port, timeout)
		if err != nil {
			return 0, err
		}
		if listening {
			return port, nil
		}
		s.Stop()
		if attempt == MaxAttempts {
			return 0, fmt.Errorf("every port the server was given was taken, %d times (its log: %s)", attempt, s.Log)
		}
	}
}

// wait reads the log until it says the server listens on port (true) or
// that the port is taken (false).
func wait(s Server, signs Signs, port int, timeout time.Duration) (bool, error) {
	listening := []byte(signs.Listening(port))
	deadline := time.Now().Add(timeout)
	for poll := time.Millisecond; ; poll = min(2*poll, 50*time.Millisecond) {
		// Whether it ended is known before the log is read, so that its
		// last words are read.
		ended := false
		select {
		case <-s.Ended:
			ended = true
		default:
		}
		data, err := os.ReadFile(s.Log)
		if err != nil && !os.IsNotExist(err) {
			return false, err
		}
		for _, t := range signs.Taken {
			if bytes.Contains(data, []byte(t)) {
				return false, nil
			}
		}
		switch {
		case ended:
			return false, fmt.Errorf("%w on port %d (its log: %s)", ErrEnded, port, s.Log)
		case bytes.Contains(data, listening):
			return true, nil
		case time.Now().After(deadline):
			return false, fmt.Errorf("the server did not say it listens on port %d within %s (its log: %s)", port, timeout, s.Log)
		}
		time.Sleep(poll)
	}
}
