package app_test

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/guidetest"
	"github.com/serverless-osb/broker/internal/mototest"
)

// TestTheGuidesShellBlocksRunAsPasted runs every shell block of the
// repository's Markdown (README.md, docs/, services/, ...) as a reader
// pastes it, each file's in order (internal/guidetest): a `make run` line
// starts `make run` (on a free port, in a new data directory, with the
// line's other variables; B, AUTH and H then name it, with the password
// it was given or printed), a `moto_server -p N &` line stands for the
// suite's moto. Only a block marked <!-- not run here: why --> on the line
// before is left out, so a new block runs by default. The sandbox's suite
// runs the blocks docs/sandbox.md sends there (TestTheGuidesRunInTheSandbox).
func TestTheGuidesShellBlocksRunAsPasted(t *testing.T) {
	all := guidetest.Blocks(t, apptest.Root())
	runs := func(file string) bool {
		return slices.ContainsFunc(all[file], func(b guidetest.Block) bool { return b.NotRun == "" })
	}
	for _, file := range []string{"README.md", "docs/aws-services.md", "docs/functions.md", "services/README.md"} {
		if !runs(file) {
			t.Errorf("%s has no shell block to run: not the guides this test knows", file)
		}
	}
	files := make([]string, 0, len(all))
	for file := range all {
		files = append(files, file)
	}
	slices.Sort(files)
	generated := regexp.MustCompile(`generated password "([^"]+)"`)
	for _, file := range files {
		if !runs(file) {
			continue
		}
		t.Run(file, func(t *testing.T) {
			s := &guidetest.Session{T: t, Root: apptest.Root(), Moto: mototest.Endpoint(t)}
			s.MakeRun = func(vars []string) guidetest.Broker {
				environ := []string{"BROKER_USERNAME=", "BROKER_PASSWORD="}
				for _, v := range vars {
					// The test's data directory (a new one) and port (a free one).
					if !regexp.MustCompile(`^BROKER_(DATA_DIR|ADDR)=`).MatchString(v) {
						environ = append(environ, v)
					}
				}
				m := startMakeRun(t, environ...)
				password := ""
				for _, v := range vars {
					if p, ok := strings.CutPrefix(v, "BROKER_PASSWORD="); ok {
						password = p
					}
				}
				if password == "" {
					p := generated.FindStringSubmatch(m.out.String())
					if p == nil {
						t.Fatalf("make run printed no generated password:\n%s", m.out.String())
					}
					password = p[1]
				}
				return guidetest.Broker{URL: m.URL, Username: "broker", Password: password}
			}
			for _, b := range all[file] {
				if b.NotRun == "" {
					s.Run(b)
				}
			}
		})
	}
}
