// Command withmoto runs a command with a moto_server beside it
// (internal/mototest/motoserver: moto with the repository's fixes, installed
// with pip where it is missing, on a free 127.0.0.1 port, Step Functions
// execution on), with MOTO_ENDPOINT set, and stops the server, whatever the
// command's outcome.
//
//	go run ./internal/mototest/withmoto -- go test ./...
package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/serverless-osb/broker/internal/mototest/motoserver"
)

func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	if len(args) == 0 {
		fail("usage: withmoto -- COMMAND [ARG...]")
	}
	code, err := run(args)
	if err != nil {
		fail(err.Error())
	}
	os.Exit(code)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "withmoto:", msg)
	os.Exit(2)
}

func run(args []string) (int, error) {
	moto, err := motoserver.Start(motoserver.Options{})
	if err != nil {
		return 0, err
	}
	defer moto.Stop()
	fmt.Fprintf(os.Stderr, "withmoto: moto_server %s on %s (log: %s)\n", motoserver.Version, moto.Endpoint, moto.LogPath)

	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "MOTO_ENDPOINT="+moto.Endpoint)
	err = cmd.Run()
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		return exit.ExitCode(), nil
	}
	if err != nil {
		return 0, err
	}
	return 0, nil
}
