package main

import (
	"bytes"
	"maps"
	"strings"
	"testing"
)

const oursOut = `goos: linux
BenchmarkCommitFloor-2                 	    3000	    250000 ns/op	         2.000 pagewrites/op	    6600 B/op	      41 allocs/op
BenchmarkCommitFloorTwoSyncs-2         	    3000	    275000 ns/op	         2.000 pagewrites/op	    6600 B/op	      41 allocs/op
BenchmarkCatalog-2                     	  376108	      6636 ns/op	   24134 B/op	      35 allocs/op
BenchmarkSyncProvision-2               	    8943	    297142 ns/op	         1.000 commits/op	         5.329 pagewrites/op	       352.0 target-allocs/op	   39175 B/op	     180 allocs/op
BenchmarkAsyncProvision-2              	    7707	    326116 ns/op	         1.000 commits/op	         6.049 pagewrites/op	       433.0 target-allocs/op	   57778 B/op	     319 allocs/op
BenchmarkBind-2                        	    8360	    318375 ns/op	         1.000 commits/op	         5.426 pagewrites/op	       405.0 target-allocs/op	   56683 B/op	     259 allocs/op
--- BENCH: BenchmarkBindWithHistory-2
PASS
`

const peerOut = `BenchmarkPeerSyncProvision-2    	    9055	    252451 ns/op	         5.800 pagewrites/op	   35299 B/op	     184 allocs/op
BenchmarkPeerAsyncProvision-2   	    7826	    309357 ns/op	         8.000 pagewrites/op	   46295 B/op	     241 allocs/op
BenchmarkPeerBind-2             	    9975	    318375 ns/op	         5.760 pagewrites/op	   35924 B/op	     199 allocs/op
`

// TestTheTableSaysWhatIsMet: each ratio is ours over the peer's, beside its
// target, met or not.
func TestTheTableSaysWhatIsMet(t *testing.T) {
	ours, err := read(strings.NewReader(oursOut))
	if err != nil {
		t.Fatal(err)
	}
	peer, err := read(strings.NewReader(peerOut))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := write(&b, ours, peer); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| synchronous provision | 0.297 ms, 180, 5.33 | 0.252 ms, 184, 5.80 | 1.18×: NOT met | 0.98×: met | 0.92×: met |",
		"| asynchronous provision → 202 | 0.326 ms, 319, 6.05 | 0.309 ms, 241, 8.00 | 1.05×: NOT met | 1.32×: met | 0.76×: met |",
		"| bind (an instance with thousands of bindings) | 0.318 ms, 259, 5.43 | 0.318 ms, 199, 5.76 | 1.00×: met | 1.30×: met | 0.94×: met | 0.068 / 0.043 ms |",
		"| synchronous provision | 0.297 ms, 180, 5.33 | 0.252 ms, 184, 5.80 | 1.18×: NOT met | 0.98×: met | 0.92×: met | 0.047 / -0.023 ms |",
		"The machine's floors in these rounds, a bbolt commit of one page: as the broker commits (BenchmarkCommitFloor: the page and the meta page written, then one fdatasync) 0.250 ms; as bbolt as released and the peer commit (BenchmarkCommitFloorTwoSyncs: an fdatasync after each) 0.275 ms.",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}

// TestAMissingResultIsAnError: a benchmark that did not run is said, not
// left out.
func TestAMissingResultIsAnError(t *testing.T) {
	ours, _ := read(strings.NewReader(oursOut))
	peer, _ := read(strings.NewReader(peerOut))
	if err := write(&bytes.Buffer{}, ours, map[string][]metrics{}); err == nil {
		t.Error("no error for the peer's missing results")
	}
	for _, f := range []string{floor, peerFloor} {
		o := maps.Clone(ours)
		delete(o, f)
		if err := write(&bytes.Buffer{}, o, peer); err == nil {
			t.Errorf("no error for the missing %s", f)
		}
	}
}

// TestRoundsGiveMediansAndTheRatiosRange: over rounds, each figure is the
// median of its rounds and each ratio the median of the rounds' ratios,
// with their range; a side with a round more than the other is an error.
func TestRoundsGiveMediansAndTheRatiosRange(t *testing.T) {
	round := func(ours, peer, floor, peerFloor string) (string, string) {
		o := strings.ReplaceAll(oursOut, "297142 ns/op", ours+" ns/op")
		o = strings.ReplaceAll(o, "275000 ns/op", peerFloor+" ns/op")
		return strings.ReplaceAll(o, "250000 ns/op", floor+" ns/op"), strings.ReplaceAll(peerOut, "252451 ns/op", peer+" ns/op")
	}
	var o, p strings.Builder
	for _, r := range [][4]string{{"300000", "250000", "200000", "230000"}, {"240000", "260000", "210000", "240000"},
		{"500000", "255000", "250000", "250000"}} {
		a, b := round(r[0], r[1], r[2], r[3])
		o.WriteString(a)
		p.WriteString(b)
	}
	ours, _ := read(strings.NewReader(o.String()))
	peer, _ := read(strings.NewReader(p.String()))
	var b bytes.Buffer
	if err := write(&b, ours, peer); err != nil {
		t.Fatal(err)
	}
	// Ratios 1.20, 0.92, 1.96: median 1.20; times' medians 0.300 and 0.255;
	// ours above its floors (0.200, 0.210, 0.250): 0.100, 0.030, 0.250
	// (median 0.100); the peer's above its (0.230, 0.240, 0.250): 0.020,
	// 0.020, 0.005 (median 0.020).
	for _, want := range []string{
		"| synchronous provision | 0.300 ms, 180, 5.33 | 0.255 ms, 184, 5.80 | 1.20× (0.92 to 1.96): NOT met | 0.98× (0.98 to 0.98): met | 0.92× (0.92 to 0.92): met | 0.100 / 0.020 ms |",
		"as the broker commits (BenchmarkCommitFloor: the page and the meta page written, then one fdatasync) 0.210 ms (0.200 to 0.250); as bbolt as released and the peer commit (BenchmarkCommitFloorTwoSyncs: an fdatasync after each) 0.240 ms (0.230 to 0.250).",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
	peer["BenchmarkPeerSyncProvision"] = peer["BenchmarkPeerSyncProvision"][:2]
	if err := write(&bytes.Buffer{}, ours, peer); err == nil {
		t.Error("no error for 3 rounds of ours and 2 of the peer's")
	}
}
