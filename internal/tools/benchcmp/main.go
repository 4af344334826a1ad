// Command benchcmp prints, after `make bench`'s handler benchmarks, issue
// 32's single-request figures side by side: each request's time,
// allocations and bbolt page writes, ours (internal/api's benchmarks) and
// the peer's (bench/peer's, the same run), each with its target: time at
// most the peer's, allocations within 1.5 × the peer's, page writes at most
// the peer's; and beside them the machine's floors (with ours: a bbolt
// commit of one page as the broker commits, BenchmarkCommitFloor, and as
// bbolt as released and the peer commit, BenchmarkCommitFloorTwoSyncs)
// and each side's time above its own.
//
//	go run ./internal/tools/benchcmp OURS PEER
//
// OURS and PEER are the output of `go test -bench` in each package, over
// rounds: `make bench` runs ours, then the peer's, then ours again, and so
// on, each with as many requests, so that the two sides' files are the
// same size and both see the machine as it was in that round. A round's
// ratio is ours over the peer's in that round; the table gives the median
// of each figure and of the rounds' ratios, with the ratios' range: one
// pair of runs on a shared machine moved by 10% and more.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
)

// floor and peerFloor are the machine's floors in each round
// (internal/api; they run with ours): a bbolt commit of one page as the
// broker commits (the page and the meta page written, then one fdatasync:
// third_party/bbolt), and as bbolt as released and the peer commit (an
// fdatasync after the page, and one after the meta page).
const (
	floor     = "BenchmarkCommitFloor"
	peerFloor = "BenchmarkCommitFloorTwoSyncs"
)

// pairs are the benchmarks compared: ours, the peer's, and what they do.
var pairs = []struct{ ours, peer, what string }{
	{"BenchmarkSyncProvision", "BenchmarkPeerSyncProvision", "synchronous provision"},
	{"BenchmarkAsyncProvision", "BenchmarkPeerAsyncProvision", "asynchronous provision → 202"},
	{"BenchmarkBind", "BenchmarkPeerBind", "bind (an instance with thousands of bindings)"},
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: benchcmp OURS PEER")
		os.Exit(2)
	}
	ours, err := readFile(os.Args[1])
	if err == nil {
		var peer map[string][]metrics
		if peer, err = readFile(os.Args[2]); err == nil {
			err = write(os.Stdout, ours, peer)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "benchcmp:", err)
		os.Exit(1)
	}
}

// metrics are a benchmark's figures by unit (ns/op, allocs/op, ...).
type metrics map[string]float64

func readFile(path string) (map[string][]metrics, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f)
}

// read reads the result lines of `go test -bench` output: a name (its
// -GOMAXPROCS suffix cut), the iterations, then value and unit pairs; a
// benchmark's results in the order they came, a round each.
func read(r io.Reader) (map[string][]metrics, error) {
	out := map[string][]metrics{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
			continue
		}
		if _, err := strconv.Atoi(f[1]); err != nil {
			continue
		}
		name := f[0]
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			if _, err := strconv.Atoi(name[i+1:]); err == nil {
				name = name[:i]
			}
		}
		m := metrics{}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				return nil, fmt.Errorf("%s: %q is no figure", name, f[i])
			}
			m[f[i+1]] = v
		}
		out[name] = append(out[name], m)
	}
	return out, sc.Err()
}

func write(w io.Writer, ours, peer map[string][]metrics) error {
	fl, pfl := ours[floor], ours[peerFloor]
	if len(fl) == 0 || len(pfl) == 0 {
		return fmt.Errorf("no result for %s or %s", floor, peerFloor)
	}
	fmt.Fprintf(w, "The machine's floors in these rounds, a bbolt commit of one page: as the broker commits (%s: the page and the meta page written, then one fdatasync) %s; as bbolt as released and the peer commit (%s: an fdatasync after each) %s.\n",
		floor, spread(fl, "ns/op"), peerFloor, spread(pfl, "ns/op"))
	fmt.Fprintln(w)
	fmt.Fprintln(w, "One request at a time, in process, ours beside the peer's in the same rounds (issue 32's targets): medians over the rounds; a ratio is the median of the rounds' ratios, their range in brackets:")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| request | ours: time, allocations, page writes | peer | time (≤ the peer's) | allocations (≤ 1.5 × the peer's) | page writes (≤ the peer's) | time above its floor: ours / the peer's |")
	fmt.Fprintln(w, "| --- | ---: | ---: | --- | --- | --- | ---: |")
	for _, p := range pairs {
		o, q := ours[p.ours], peer[p.peer]
		if len(o) == 0 || len(q) == 0 {
			return fmt.Errorf("no result for %s and %s", p.ours, p.peer)
		}
		if len(o) != len(q) || len(o) != len(fl) || len(o) != len(pfl) {
			return fmt.Errorf("%d rounds of %s, %d of %s, %d of %s and %d of %s: a round is one of each",
				len(o), p.ours, len(q), p.peer, len(fl), floor, len(pfl), peerFloor)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %.3f / %.3f ms |\n", p.what, figures(o), figures(q),
			verdict(o, q, "ns/op", 1), verdict(o, q, "allocs/op", 1.5), verdict(o, q, "pagewrites/op", 1),
			above(o, fl)/1e6, above(q, pfl)/1e6)
	}
	return nil
}

// spread is a figure's median over the rounds, in ms, and its range.
func spread(rounds []metrics, unit string) string {
	v := make([]float64, len(rounds))
	for i, m := range rounds {
		v[i] = m[unit] / 1e6
	}
	if len(v) == 1 {
		return fmt.Sprintf("%.3f ms", v[0])
	}
	return fmt.Sprintf("%.3f ms (%.3f to %.3f)", medianOf(v), slices.Min(v), slices.Max(v))
}

// above is the median over the rounds of a request's time above the
// floor of its round.
func above(rounds, floor []metrics) float64 {
	v := make([]float64, len(rounds))
	for i, m := range rounds {
		v[i] = m["ns/op"] - floor[i]["ns/op"]
	}
	return medianOf(v)
}

func figures(rounds []metrics) string {
	return fmt.Sprintf("%.3f ms, %.0f, %.2f", median(rounds, "ns/op")/1e6, median(rounds, "allocs/op"), median(rounds, "pagewrites/op"))
}

// median is the median of a figure over the rounds.
func median(rounds []metrics, unit string) float64 {
	v := make([]float64, len(rounds))
	for i, m := range rounds {
		v[i] = m[unit]
	}
	return medianOf(v)
}

func medianOf(v []float64) float64 {
	slices.Sort(v)
	n := len(v)
	if n%2 == 1 {
		return v[n/2]
	}
	return (v[n/2-1] + v[n/2]) / 2
}

// verdict is the median of the rounds' ratios of ours over the peer's, its
// range, and whether it is within most.
func verdict(ours, peer []metrics, unit string, most float64) string {
	ratios := make([]float64, 0, len(ours))
	for i := range ours {
		if peer[i][unit] == 0 {
			return "no figure"
		}
		ratios = append(ratios, ours[i][unit]/peer[i][unit])
	}
	r := medianOf(ratios) // sorts them: Min and Max do not mind
	met := "met"
	if r > most {
		met = "NOT met"
	}
	if len(ratios) == 1 {
		return fmt.Sprintf("%.2f×: %s", r, met)
	}
	return fmt.Sprintf("%.2f× (%.2f to %.2f): %s", r, slices.Min(ratios), slices.Max(ratios), met)
}
