package sandbox_test

import (
	"path/filepath"
	"testing"

	"github.com/serverless-osb/broker/internal/guidetest"
)

// TestTheGuidesRunInTheSandbox runs, against the suite's sandbox, the shell
// blocks docs/sandbox.md says work there as they are: the README's curl
// tour (the demo service), as internal/guidetest runs them, the `make run`
// line standing for the sandbox and its password for the guide's. Not the
// example services' commands (docs/aws-services.md), whose last one lists
// the bucket with aws-cli: the sandbox's moto refuses aws-cli's S3 calls
// (SignatureDoesNotMatch, whatever the keys), as docs/sandbox.md says.
func TestTheGuidesRunInTheSandbox(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	all := guidetest.Blocks(t, root)
	for _, file := range []string{"README.md"} {
		t.Run(file, func(t *testing.T) {
			s := &guidetest.Session{T: t, Root: root, Moto: shared.Moto, MakeRun: func([]string) guidetest.Broker {
				return guidetest.Broker{URL: shared.URL, Username: shared.Username, Password: shared.Password}
			}}
			ran := 0
			for _, b := range all[file] {
				if b.NotRun == "" {
					s.Run(b)
					ran++
				}
			}
			if ran == 0 {
				t.Fatalf("%s has no block to run", file)
			}
		})
	}
}
