// Command benchcmp prints, after `make bench`'s handler benchmarks, issue
// 32's single-request figures side by side: each request's time,
// allocations and bbolt page writes, ours (internal/api's benchmarks) and
// the peer's (bench/peer's, the same run), each with its target: time at
// most the peer's, allocations within 1.5 × the peer's, page writes at most
// the peer's.
//
//	go run ./internal/tools/benchcmp OURS PEER
//
// OURS and PEER are the output of `go test -bench` in each package.
package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
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
		var peer map[string]metrics
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

func readFile(path string) (map[string]metrics, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return read(f)
}

// read reads the result lines of `go test -bench` output: a name (its
// -GOMAXPROCS suffix cut), the iterations, then value and unit pairs.
func read(r io.Reader) (map[string]metrics, error) {
	out := map[string]metrics{}
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
		out[name] = m
	}
	return out, sc.Err()
}

func write(w io.Writer, ours, peer map[string]metrics) error {
	fmt.Fprintln(w, "One request at a time, in process, ours beside the peer's in the same run (issue 32's targets):")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| request | ours: time, allocations, page writes | peer | time (≤ the peer's) | allocations (≤ 1.5 × the peer's) | page writes (≤ the peer's) |")
	fmt.Fprintln(w, "| --- | ---: | ---: | --- | --- | --- |")
	for _, p := range pairs {
		o, ok1 := ours[p.ours]
		q, ok2 := peer[p.peer]
		if !ok1 || !ok2 {
			return fmt.Errorf("no result for %s and %s", p.ours, p.peer)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", p.what, figures(o), figures(q),
			verdict(o["ns/op"], q["ns/op"], 1, "%.2f×"), verdict(o["allocs/op"], q["allocs/op"], 1.5, "%.2f×"),
			verdict(o["pagewrites/op"], q["pagewrites/op"], 1, "%.2f×"))
	}
	return nil
}

func figures(m metrics) string {
	return fmt.Sprintf("%.3f ms, %.0f, %.2f", m["ns/op"]/1e6, m["allocs/op"], m["pagewrites/op"])
}

// verdict is ours over the peer's, and whether it is within most.
func verdict(ours, peer, most float64, format string) string {
	if peer == 0 {
		return "no figure"
	}
	r := ours / peer
	met := "met"
	if r > most {
		met = "NOT met"
	}
	return fmt.Sprintf(format+": %s", r, met)
}
