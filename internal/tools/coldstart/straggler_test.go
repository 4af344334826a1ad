package main

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// TestMain runs the test binary as a stand-in function when coldStart
// starts it as a bundle's bootstrap (TestAStragglersPollTakesNoLaterEvent).
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == bootstrapName {
		if err := standInFunction(); err != nil {
			os.Stderr.WriteString("stand-in function: " + err.Error() + "\n")
			os.Exit(1)
		}
		return
	}
	os.Exit(m.Run())
}

const bootstrapName = "bootstrap"

// A killed bootstrap's last poll for an event may reach the stand-in late,
// after the next cold start began: it must not take that one's event (with
// one stand-in for every run it did, and the next run waited 30 s for an
// event and failed). The stand-in function makes it happen every time: the
// first process leaves a straggler that polls, with the first's address,
// once the first is dead and the second has started; the second polls
// only after it.
func TestAStragglersPollTakesNoLaterEvent(t *testing.T) {
	bundle := filepath.Join(t.TempDir(), "api")
	if err := os.Mkdir(bundle, 0o755); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(bundle, bootstrapName)); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "deploy.json"), []byte(`{}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := coldStarts(bundle, "api", 1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(bundle, "straggled")); err != nil {
		t.Fatalf("the straggler did not poll: %v", err)
	}
}

// standInFunction answers one event as the api would, enough for
// coldStart. The first process (no file "first" in its task root) also
// starts the straggler; the second waits for the straggler to have polled.
func standInFunction() error {
	root, api := os.Getenv("LAMBDA_TASK_ROOT"), os.Getenv("AWS_LAMBDA_RUNTIME_API")
	mark := func(name string) error { return os.WriteFile(filepath.Join(root, name), nil, 0o644) }
	if os.Getenv("COLDSTART_STRAGGLER") != "" {
		_, _ = io.Copy(io.Discard, os.NewFile(3, "parent")) // until the first process is dead
		if err := await(filepath.Join(root, "second")); err != nil {
			return err
		}
		if resp, err := http.Get("http://" + api + "/2018-06-01/runtime/invocation/next"); err == nil {
			resp.Body.Close()
		}
		return mark("straggled")
	}
	first := true
	if _, err := os.Stat(filepath.Join(root, "first")); err == nil {
		first = false
		if err := mark("second"); err != nil {
			return err
		}
		if err := await(filepath.Join(root, "straggled")); err != nil {
			return err
		}
	} else if err := mark("first"); err != nil {
		return err
	}
	resp, err := http.Get("http://" + api + "/2018-06-01/runtime/invocation/next")
	if err != nil {
		return err
	}
	resp.Body.Close()
	id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
	// Before the answer: coldStart kills the process once it has it.
	if first {
		r, w, err := os.Pipe()
		if err != nil {
			return err
		}
		straggler := exec.Command(os.Args[0])
		straggler.Env = append(os.Environ(), "COLDSTART_STRAGGLER=1")
		straggler.ExtraFiles = []*os.File{r}
		if err := straggler.Start(); err != nil {
			return err
		}
		defer w.Close() // open until this process is killed
	}
	if resp, err = http.Post("http://"+api+"/2018-06-01/runtime/invocation/"+id+"/response", "application/json",
		bytes.NewReader([]byte(`{"statusCode":200}`))); err != nil {
		return err
	}
	resp.Body.Close()
	select {} // as a function waiting for its next event, until killed
}

// await waits for the file at path to exist; a bound, not a timing: a
// straggler left by a failed test ends.
func await(path string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	return errors.New(path + " never appeared")
}
