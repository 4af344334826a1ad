package api_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/serverless-osb/broker/internal/app"
)

// Both sides of `make bench`'s comparison collect at the broker's setting
// (newBench here, newBench in bench/peer): a peer at another would compare
// two collectors as well as two brokers.
func TestThePeerBenchmarksCollectAsTheBroker(t *testing.T) {
	src, err := os.ReadFile(filepath.Join("..", "..", "bench", "peer", "main_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^const gcPercent = (\d+)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("bench/peer/main_test.go declares no const gcPercent")
	}
	if got, _ := strconv.Atoi(string(m[1])); got != app.BrokerGCPercent {
		t.Errorf("the peer's benchmarks collect at GOGC=%d, the broker at %d (app.BrokerGCPercent)", got, app.BrokerGCPercent)
	}
	if !strings.Contains(string(src), "debug.SetGCPercent(gcPercent)") {
		t.Error("bench/peer/main_test.go does not set its collector to gcPercent")
	}
}
