package app_test

import (
	"net/http"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
)

// TestTheLocalBrokerLetsGoOfThePagesOnlyItsStartTouched runs the local
// broker as `make run` does, in this process, and reads how much of the
// process's binary (its read-only mappings: text, rodata, pclntab) is
// resident before and once the broker has answered a catalog read. Before,
// the pages its package inits had touched stayed mapped for good (18 MiB of
// the `make run` binary, idle; docs/performance.md); now the broker lets
// them go once listening, and only what serving touches comes back.
func TestTheLocalBrokerLetsGoOfThePagesOnlyItsStartTouched(t *testing.T) {
	localEnv(t, "warn")
	before := residentBinaryKiB(t)
	url := runLocal(t)
	req, err := http.NewRequest(http.MethodGet, url+"/v2/catalog", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth(apptest.Username, apptest.Password)
	req.Header.Set("X-Broker-API-Version", "2.17")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("catalog: %d", resp.StatusCode)
	}
	after := residentBinaryKiB(t)
	t.Logf("the test binary's read-only pages resident: %d KiB before the broker started, %d KiB once it answered", before, after)
	if after > before*4/5 {
		t.Errorf("%d KiB of the binary's read-only pages resident once the broker answered, %d KiB before it started: want at most four fifths", after, before)
	}
}

// residentBinaryKiB is how much of this process's binary's read-only
// mappings is resident.
func residentBinaryKiB(t *testing.T) int {
	t.Helper()
	kib, err := app.ResidentBinaryKiB()
	if err != nil {
		t.Fatal(err)
	}
	if kib == 0 {
		t.Fatal("no resident pages of the binary found in /proc/self/smaps")
	}
	return kib
}
