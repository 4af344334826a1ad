// Command load measures the local broker (the `make run` binary) under
// load, on 127.0.0.1 only, bounded in requests and time: how many
// asynchronous provisions it answers 202 per second with a few clients, the
// latency of bursts of concurrent ones, and the CPU time and memory the
// broker process used. `make bench` runs it; it prints a table.
//
// The clients run on the broker's machine and share its processors. The
// bursts are measured each request on a new connection and on connections
// already open (as a platform's client pool keeps them), and beside the
// same burst of catalog reads, which do no store work: what the machine
// allows at all. One burst's p99 moves with what else the machine runs, so
// they are measured in rounds (-rounds), each a burst of provisions and one
// of catalog reads, and the target's ratio is taken per round and printed
// as its median over the rounds, with its range.
//
// Each figure is printed beside its target (issue 32), and the peer's
// figure where the issue measured one: a broker on brokerapi v13 with
// bbolt, the same catalog and validator, measured on this machine on
// 2026-11-28 (not run here). The broker's memory is read four times: after
// a tenth of the provisions, after all of them (a run ten times longer: it
// must not grow with the run, as the executions still in flight wait
// parked), once idle after the first round of bursts (the same provisions
// in all, whatever the rounds), and after the last round.
package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

const password = "load-password"

// The issue's figures (issue 32, 2026-11-28, this machine): today's
// throughput, and the peer's RSS after its load run.
const (
	issueThroughput = 2275 // 202s per second, 8 clients
	peerRSS         = 36.7 // MiB
	peerThroughput  = 1279
	burstRatio      = 1.5 // a burst of provisions' p99 over the catalog reads'
)

func main() {
	clients := flag.Int("clients", 8, "clients sending provisions one after another")
	n := flag.Int("n", 4000, "provisions the clients send in all")
	burst := flag.Int("burst", 1000, "provisions sent at once in the burst phase")
	rounds := flag.Int("rounds", 5, "rounds of bursts, each a burst of provisions and one of catalog reads, on new connections and again on open ones")
	limit := flag.Duration("timeout", 5*time.Minute, "the whole run's limit")
	binary := flag.String("binary", "", "the broker binary (default: build ./functions/api)")
	peerBinary := flag.String("peer", "", "the peer binary (default: build ./bench/peer; \"none\": print the issue's peer figures)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	if err := measureBoth(ctx, *binary, *peerBinary, *clients, *n, *burst, max(*rounds, 1)); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

// measureBoth measures our broker, then the peer on the same load, and
// prints both. A peer that cannot be built is reported, and the issue's
// figures printed in its place.
func measureBoth(ctx context.Context, binary, peerBinary string, clients, n, burst, rounds int) error {
	dir, err := os.MkdirTemp("", "osb-load-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if binary == "" {
		binary = filepath.Join(dir, "api")
		if err := goBuild(ctx, ".", binary, "./functions/api"); err != nil {
			return err
		}
	}
	var peerErr error
	if peerBinary == "" {
		peerBinary = filepath.Join(dir, "peer")
		// The peer is its own module (bench/peer/go.mod), built from its
		// own directory.
		peerErr = goBuild(ctx, "bench/peer", peerBinary, ".")
	}
	ours, err := run(ctx, binary, clients, n, burst, rounds)
	if err != nil {
		return err
	}
	var peer *result
	switch {
	case peerBinary == "none":
	case peerErr != nil:
		fmt.Fprintf(os.Stderr, "load: the peer could not be built (%v); the issue's figures stand in for it\n", peerErr)
	default:
		if peer, err = run(ctx, peerBinary, clients, n, burst, rounds); err != nil {
			return fmt.Errorf("peer: %w", err)
		}
	}
	report(ours, peer, clients, n, burst)
	return nil
}

func goBuild(ctx context.Context, dir, out, pkg string) error {
	build := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	build.Dir = dir
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("build %s in %s: %w", pkg, dir, err)
	}
	return nil
}

// result is one broker's figures.
type result struct {
	rate               float64 // 202s per second
	p50, p99           time.Duration
	cpuPer             time.Duration
	tenth, steady, end mem
	tenthDone          bool
	peak               float64
	fresh, open        []round // the burst rounds, on new connections and on open ones
	last               mem     // idle after all the rounds
	total              int     // the provisions sent in all
}

type burstFigures struct{ p50, p99, all time.Duration }

// round is a burst of provisions and one of catalog reads sent just after
// it (or just before: rounds take turns), each on an idle broker.
type round struct{ prov, cat burstFigures }

// ratio is the provisions' p99 over the catalog reads' of the same round.
func (r round) ratio() float64 { return float64(r.prov.p99) / float64(r.cat.p99) }

type sendFunc func(c *client, i int, tag string) (time.Duration, error)

// burstRound measures one round: on new connections (fresh) each request
// dials its own; otherwise a catalog burst first opens the connections and
// leaves them idle in the pool, and both bursts reuse them.
func burstRound(ctx context.Context, pid int, base string, n int, fresh bool, k int, provision, catalog sendFunc) (round, error) {
	pool := func() *client {
		return &client{base: base, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}}
	}
	bc := pool()
	if !fresh {
		if _, err := bc.burst(ctx, n, func(i int) (time.Duration, error) { return catalog(bc, i, "") }); err != nil {
			return round{}, err
		}
	}
	defer func() { bc.http.CloseIdleConnections() }()
	var rd round
	one := func(send sendFunc, into *burstFigures, tag string) error {
		if fresh {
			bc.http.CloseIdleConnections()
			bc = pool()
		}
		// Each burst starts on an idle broker: not beside the Tasks the
		// one before started, which would weigh on whichever comes next.
		settled(ctx, pid)
		res, err := bc.burst(ctx, n, func(i int) (time.Duration, error) { return send(bc, i, tag) })
		*into = burstFigures{p50: pct(res.lat, 50), p99: pct(res.lat, 99), all: res.elapsed}
		return err
	}
	tag := fmt.Sprintf("burst%d-%t-", k, fresh)
	first, second := func() error { return one(provision, &rd.prov, tag) }, func() error { return one(catalog, &rd.cat, "") }
	if k%2 == 1 {
		first, second = second, first
	}
	if err := first(); err != nil {
		return round{}, err
	}
	return rd, second()
}

func run(ctx context.Context, binary string, clients, n, burst, rounds int) (*result, error) {
	dir, err := os.MkdirTemp("", "osb-load-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, binary)
	cmd.Env = append(os.Environ(), "BROKER_ADDR="+addr, "BROKER_DATA_DIR="+filepath.Join(dir, "data"),
		"BROKER_PASSWORD="+password, "BROKER_CATALOG=catalog.yaml", "BROKER_STATEMACHINES=statemachines")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the broker: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	c := &client{base: "http://" + addr, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burst + clients}}}
	if err := c.waitReady(ctx); err != nil {
		return nil, err
	}
	pid := cmd.Process.Pid
	service, plan, err := c.plan(ctx, "fake-async-plan")
	if err != nil {
		return nil, err
	}
	body := func() []byte {
		return fmt.Appendf(nil, `{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":600}}`, service, plan)
	}

	provision := sendFunc(func(c *client, i int, tag string) (time.Duration, error) {
		return c.provision(ctx, tag+strconv.Itoa(i), body())
	})
	catalog := sendFunc(func(c *client, _ int, _ string) (time.Duration, error) {
		start := time.Now()
		code, data, err := c.do(ctx, http.MethodGet, "/v2/catalog", nil)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("catalog: %d %s", code, data)
		}
		return time.Since(start), err
	})

	// Steady: clients send n provisions, one after another each; the
	// broker's memory is read after the first tenth (once it is idle) and
	// at the end, ten times as long.
	var (
		next      atomic.Int64
		lat       = make([]time.Duration, n)
		elapsed   time.Duration
		cpu       time.Duration
		memTenth  mem
		tenthDone bool
	)
	steady := func(upTo int) error {
		cpu0 := cpuTime(pid)
		start := time.Now()
		errs := make(chan error, clients)
		var wg sync.WaitGroup
		for range clients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					i := int(next.Add(1)) - 1
					if i >= upTo {
						next.Add(-1)
						return
					}
					d, err := provision(c, i, "steady-")
					if err != nil {
						errs <- err
						return
					}
					lat[i] = d
				}
			}()
		}
		wg.Wait()
		elapsed += time.Since(start)
		cpu += cpuTime(pid) - cpu0
		close(errs)
		return <-errs
	}
	if n >= 10 {
		if err := steady(n / 10); err != nil {
			return nil, err
		}
		memTenth, tenthDone = settled(ctx, pid), true
	}
	if err := steady(n); err != nil {
		return nil, err
	}
	memSteady := settled(ctx, pid)
	_, hwm := memory(pid)

	// Bursts: many requests at once, each on a new connection and on
	// connections already open; provisions, and catalog reads (no store
	// work) to show what the machine itself allows. One burst's p99 moves
	// with whatever else the machine runs at that moment, so each figure is
	// taken over rounds: a round is a burst of provisions and one of catalog
	// reads, one just after the other (in turn which first), and the ratio
	// of their p99s is taken per round, then its median over the rounds.
	r := &result{}
	var hwm2 float64
	for k := range rounds {
		for _, fresh := range []bool{true, false} {
			rd, err := burstRound(ctx, pid, c.base, burst, fresh, k, provision, catalog)
			if err != nil {
				return nil, err
			}
			if fresh {
				r.fresh = append(r.fresh, rd)
			} else {
				r.open = append(r.open, rd)
			}
		}
		if k == 0 {
			// The end figure as it was read when there was one round: after
			// the same provisions in all, so that it compares across runs
			// whatever their rounds. Each round adds the data of 2 bursts of
			// provisions, which the last figure shows.
			r.end = settled(ctx, pid)
			_, hwm2 = memory(pid)
		}
	}
	r.last = settled(ctx, pid)
	r.total = n + 2*burst*rounds
	r.rate = float64(n) / elapsed.Seconds()
	r.p50, r.p99 = pct(lat, 50), pct(lat, 99)
	r.cpuPer = cpu / time.Duration(n)
	r.tenth, r.steady, r.tenthDone = memTenth, memSteady, tenthDone
	r.peak = max(hwm, hwm2)
	return r, nil
}

// report prints our figures beside their targets and the peer's: measured
// in this run, or else the issue's.
func report(ours, peer *result, clients, n, burst int) {
	fmt.Printf("Asynchronous provisions on 127.0.0.1, bbolt with an fsync per commit. Ours: the `make run` binary.\n")
	peerCell := func(f func(r *result) string, issue string) string {
		if peer != nil {
			return f(peer)
		}
		return issue
	}
	if peer != nil {
		fmt.Printf("Peer: bench/peer (brokerapi v13 with bbolt, the same catalog and validator), the same load just after ours.\n\n")
	} else {
		fmt.Printf("Peer: issue 32's figures (brokerapi v13 with bbolt, the same catalog and validator, 2026-11-28, this machine), not run here.\n\n")
	}
	fmt.Printf("| figure | ours | target | peer |\n| --- | ---: | --- | ---: |\n")
	rateTarget := float64(issueThroughput)
	fmt.Printf("| %d provisions by %d clients: 202s per second | %.0f | ≥ %d (issue 32's run): %s | %s |\n",
		n, clients, ours.rate, issueThroughput, verdict(ours.rate >= rateTarget),
		peerCell(func(r *result) string { return fmt.Sprintf("%.0f", r.rate) }, strconv.Itoa(peerThroughput)))
	fmt.Printf("| their latency p50 / p99 | %s / %s | | %s |\n", ours.p50, ours.p99,
		peerCell(func(r *result) string { return fmt.Sprintf("%s / %s", r.p50, r.p99) }, ""))
	cpuTarget, cpuVerdict := "the peer's", ""
	if peer != nil {
		cpuVerdict = ": " + verdict(ours.cpuPer <= peer.cpuPer)
	}
	fmt.Printf("| broker CPU per provision (user + system) | %s | %s%s | %s |\n", ms(ours.cpuPer), cpuTarget, cpuVerdict,
		peerCell(func(r *result) string { return ms(r.cpuPer) }, "about ours"))
	limit := peerRSS * 1.1
	if peer != nil {
		limit = peer.steady.rss() * 1.1
	}
	fmt.Printf("| RSS after the %d provisions, idle (anonymous + file-backed: the binary, bbolt's mapped file) | %s | ≤ %.1f MiB (peer + 10%%): %s | %s |\n",
		n, ours.steady, limit, verdict(ours.steady.rss() <= limit),
		peerCell(func(r *result) string { return r.steady.String() }, fmt.Sprintf("%.1f MiB", peerRSS)))
	if ours.tenthDone {
		// The executions still in flight are live data, and wait parked;
		// what grows with the run is bbolt's mapped file (the data).
		fmt.Printf("| RSS after the first %d, idle (the run ten times shorter) | %s | anonymous memory not grown by the run ten times longer: %s | %s |\n",
			n/10, ours.tenth, verdict(ours.steady.anon <= ours.tenth.anon*1.25+4),
			peerCell(func(r *result) string { return r.tenth.String() }, ""))
	}
	for _, kind := range []struct {
		conn   string
		rounds func(r *result) []round
	}{
		{"each on a new connection", func(r *result) []round { return r.fresh }},
		{"on connections already open", func(r *result) []round { return r.open }},
	} {
		rows := []struct {
			what string
			of   func(rd round) burstFigures
		}{
			{"provisions", func(rd round) burstFigures { return rd.prov }},
			{"catalog reads (the floor: no store work)", func(rd round) burstFigures { return rd.cat }},
		}
		for _, row := range rows {
			cell := func(r *result) string { return burstCell(kind.rounds(r), row.of) }
			fmt.Printf("| %d %s %s, %d rounds: latency p50 / p99 (median over the rounds; p99's range), all answered in | %s | | %s |\n",
				burst, row.what, kind.conn, len(kind.rounds(ours)), cell(ours), peerCell(cell, ""))
		}
		ratio, lo, hi := ratios(kind.rounds(ours))
		fmt.Printf("| provisions' p99 over the catalog reads' of the same round, %s: median (range) | %.2f× (%.2f to %.2f×) | ≤ %.1f×: %s | %s |\n",
			strings.TrimPrefix(kind.conn, "each "), ratio, lo, hi, burstRatio, verdict(ratio <= burstRatio),
			peerCell(func(r *result) string {
				m, lo, hi := ratios(kind.rounds(r))
				return fmt.Sprintf("%.2f× (%.2f to %.2f×)", m, lo, hi)
			}, ""))
	}
	fmt.Printf("| RSS idle after the first round of bursts (%d provisions in all) / peak by then | %s / %.1f MiB | | %s |\n",
		n+2*burst, ours.end, ours.peak,
		peerCell(func(r *result) string { return fmt.Sprintf("%s / %.1f MiB", r.end, r.peak) }, ""))
	fmt.Printf("| RSS idle after all %d rounds (%d provisions in all: the data grows) | %s | | %s |\n",
		len(ours.fresh), ours.total, ours.last, peerCell(func(r *result) string { return r.last.String() }, ""))
}

// burstCell is one kind of burst over the rounds: the medians of its p50,
// p99 and time to the last answer, and the p99's range.
func burstCell(rounds []round, of func(round) burstFigures) string {
	var p50, p99, all []time.Duration
	for _, rd := range rounds {
		f := of(rd)
		p50, p99, all = append(p50, f.p50), append(p99, f.p99), append(all, f.all)
	}
	return fmt.Sprintf("%s / %s (%s to %s), %s", median(p50), median(p99), slices.Min(p99), slices.Max(p99),
		median(all).Round(time.Millisecond))
}

// ratios is the median of the rounds' ratios and their range.
func ratios(rounds []round) (med, lo, hi float64) {
	rs := make([]float64, len(rounds))
	for i, rd := range rounds {
		rs[i] = rd.ratio()
	}
	return median(rs), slices.Min(rs), slices.Max(rs)
}

// median is the middle value, or the mean of the two middle ones.
func median[T time.Duration | float64](vs []T) T {
	s := slices.Clone(vs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "NOT met"
}

// mem is a process's resident memory, in MiB: anonymous (heap, stacks)
// and file-backed (its binary's pages and bbolt's mapped file).
// Of the file-backed pages, binary are the broker's executable's and data
// its bolt file's (smaps).
type mem struct{ anon, file, binary, data float64 }

func (m mem) rss() float64 { return m.anon + m.file }

func (m mem) String() string {
	return fmt.Sprintf("%.1f MiB (%.1f + %.1f: binary %.1f, bolt file %.1f)", m.rss(), m.anon, m.file, m.binary, m.data)
}

// mappedFiles reads how much of a process's binary and of its bolt file
// (a *.db) is resident, in MiB, from /proc/PID/smaps.
func mappedFiles(pid int) (binary, data float64) {
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	smaps, _ := os.ReadFile(fmt.Sprintf("/proc/%d/smaps", pid))
	var into *float64
	for _, line := range strings.Split(string(smaps), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 5 && strings.Contains(f[0], "-") && !strings.HasSuffix(f[0], ":"):
			// A mapping's header: address range, perms, offset, device, inode, path.
			into = nil
			if len(f) >= 6 && exe != "" && f[5] == exe {
				into = &binary
			} else if len(f) >= 6 && strings.HasSuffix(f[5], ".db") {
				into = &data
			}
		case len(f) >= 2 && f[0] == "Rss:" && into != nil:
			kb, _ := strconv.ParseFloat(f[1], 64)
			*into += kb / 1024
		}
	}
	return binary, data
}

// settled reads a process's memory once it is idle: when its CPU time has
// stopped moving for a second and a half (the executions a run started
// have run their first Tasks and parked, and what a broker does once quiet
// is done: ours returns the heap's free memory after a second of quiet), or
// after 30 s.
func settled(ctx context.Context, pid int) mem {
	deadline := time.Now().Add(30 * time.Second)
	for last, still := cpuTime(pid), 0; still < 6 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(250 * time.Millisecond)
		now := cpuTime(pid)
		if now-last <= 10*time.Millisecond {
			still++
		} else {
			still = 0
		}
		last = now
	}
	var m mem
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "RssAnon:":
			m.anon = kb / 1024
		case "RssFile:", "RssShmem:":
			m.file += kb / 1024
		}
	}
	m.binary, m.data = mappedFiles(pid)
	return m
}

type burstResult struct {
	lat     []time.Duration
	elapsed time.Duration
}

// burst sends n requests at once and waits for their answers.
func (c *client) burst(ctx context.Context, n int, send func(i int) (time.Duration, error)) (burstResult, error) {
	res := burstResult{lat: make([]time.Duration, n)}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			d, err := send(i)
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
			res.lat[i] = d
		}()
	}
	start := time.Now()
	close(gate)
	wg.Wait()
	res.elapsed = time.Since(start)
	return res, cmp.Or(firstErr, ctx.Err())
}

type client struct {
	base string
	http *http.Client
}

func (c *client) do(ctx context.Context, method, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.SetBasicAuth("broker", password)
	req.Header.Set("X-Broker-API-Version", "2.17")
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

func (c *client) provision(ctx context.Context, id string, body []byte) (time.Duration, error) {
	start := time.Now()
	code, data, err := c.do(ctx, http.MethodPut, "/v2/service_instances/"+id+"?accepts_incomplete=true", body)
	if err == nil && code != http.StatusAccepted {
		err = fmt.Errorf("provision %s: %d %s", id, code, data)
	}
	return time.Since(start), err
}

func (c *client) waitReady(ctx context.Context) error {
	for {
		if code, _, err := c.do(ctx, http.MethodGet, "/v2/catalog", nil); err == nil && code == http.StatusOK {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("the broker did not answer its catalog")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// plan finds a plan's service and plan ids in the catalog.
func (c *client) plan(ctx context.Context, name string) (string, string, error) {
	_, data, err := c.do(ctx, http.MethodGet, "/v2/catalog", nil)
	if err != nil {
		return "", "", err
	}
	var cat struct {
		Services []struct {
			ID    string `json:"id"`
			Plans []struct {
				ID   string `json:"id"`
				Name string `json:"name"`
			} `json:"plans"`
		} `json:"services"`
	}
	if err := json.Unmarshal(data, &cat); err != nil {
		return "", "", fmt.Errorf("catalog: %w", err)
	}
	for _, s := range cat.Services {
		for _, p := range s.Plans {
			if p.Name == name {
				return s.ID, p.ID, nil
			}
		}
	}
	return "", "", fmt.Errorf("no plan %s in the catalog", name)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// cpuTime is the user and system time of a process, from /proc.
func cpuTime(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+2:]))
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// memory is a process's resident set and its peak, in MiB, from /proc.
func memory(pid int) (rss, peak float64) {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb / 1024
		case "VmHWM:":
			peak = kb / 1024
		}
	}
	return rss, peak
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)].Round(10 * time.Microsecond)
}
