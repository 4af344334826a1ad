package app_test

import (
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
	"github.com/serverless-osb/broker/internal/app/apptest"
	"github.com/serverless-osb/broker/internal/waittest"
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
	// Every page resident, whatever the tests before let go of.
	if err := app.TouchBinary(); err != nil {
		t.Fatal(err)
	}
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

// TestAnIdleLocalBrokerLetsGoOfTheBinaryPagesItsWorkMapped runs the local
// broker as `make run` does, in this process, sends it provisions and
// catalog reads, and waits for the process, quiet again, to hold at most
// half the pages of its binary that it held just after them. Serving maps
// the 64 KB around each piece of code it runs (the kernel's fault-around),
// so a few requests left 10 to 15 MiB of the `make run` binary resident,
// for good, of which they ran a fraction (docs/performance.md).
func TestAnIdleLocalBrokerLetsGoOfTheBinaryPagesItsWorkMapped(t *testing.T) {
	localEnv(t, "warn")
	url := runLocal(t)
	send := func(method, path, body string) []byte {
		code, data, err := sender(http.DefaultClient, url)(method, path, body)
		if err != nil || code >= 300 {
			t.Fatalf("%s %s: %d %s %v", method, path, code, data, err)
		}
		return data
	}
	serviceID, planID := planIDs(t, send(http.MethodGet, "/v2/catalog", ""), "fake-plan")
	body := fmt.Sprintf(`{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s"}`, serviceID, planID)
	for i := range 50 {
		send(http.MethodPut, fmt.Sprintf("/v2/service_instances/work-%d", i), body)
		send(http.MethodGet, "/v2/catalog", "")
	}
	// Read from /proc/self/statm, which costs next to nothing: reading
	// smaps as often as the wait polls would keep the process from going
	// quiet. Its file-backed pages are the binary's and the bolt file's.
	busy := residentFileKiB(t)
	waittest.Until(t, func() error {
		if idle := residentFileKiB(t); idle > busy/2 {
			return fmt.Errorf("%d KiB of file-backed pages resident (the binary's and the bolt file's), %d KiB just after the work: want at most half", idle, busy)
		}
		return nil
	})
}

// residentFileKiB is how much of this process's file-backed memory is
// resident (/proc/self/statm's shared pages).
func residentFileKiB(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(data))
	if len(f) < 3 {
		t.Fatalf("/proc/self/statm: %q", data)
	}
	pages, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatal(err)
	}
	return pages * os.Getpagesize() / 1024
}
