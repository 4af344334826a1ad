// Command load measures the local broker (the `make run` binary) under
// load, on 127.0.0.1 only, bounded in requests and time: how many
// asynchronous provisions it answers 202 per second with a few clients, the
// latency of bursts of concurrent ones, and the CPU time and memory the
// broker process used. `make bench` runs it; it prints a table.
//
// The clients run on the broker's machine and share its processors. Each
// burst is measured twice, each request on a new connection and on
// connections already open (as a platform's client pool keeps them), and
// beside the same burst of catalog reads, which do no store work: what the
// machine allows at all.
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

func main() {
	clients := flag.Int("clients", 8, "clients sending provisions one after another")
	n := flag.Int("n", 4000, "provisions the clients send in all")
	burst := flag.Int("burst", 1000, "provisions sent at once in the burst phase")
	limit := flag.Duration("timeout", 3*time.Minute, "the whole run's limit")
	binary := flag.String("binary", "", "the broker binary (default: build ./functions/api)")
	flag.Parse()
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	if err := run(ctx, *binary, *clients, *n, *burst); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, binary string, clients, n, burst int) error {
	dir, err := os.MkdirTemp("", "osb-load-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if binary == "" {
		binary = filepath.Join(dir, "api")
		build := exec.CommandContext(ctx, "go", "build", "-o", binary, "./functions/api")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build: %w", err)
		}
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	logFile, err := os.Create(filepath.Join(dir, "broker.log"))
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.CommandContext(ctx, binary)
	cmd.Env = append(os.Environ(), "BROKER_ADDR="+addr, "BROKER_DATA_DIR="+filepath.Join(dir, "data"),
		"BROKER_PASSWORD="+password, "BROKER_CATALOG=catalog.yaml", "BROKER_STATEMACHINES=statemachines")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the broker: %w", err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	c := &client{base: "http://" + addr, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burst + clients}}}
	if err := c.waitReady(ctx); err != nil {
		return err
	}
	pid := cmd.Process.Pid
	service, plan, err := c.plan(ctx, "fake-async-plan")
	if err != nil {
		return err
	}
	body := func() []byte {
		return fmt.Appendf(nil, `{"service_id":%q,"plan_id":%q,"organization_guid":"o","space_guid":"s","parameters":{"duration_seconds":600}}`, service, plan)
	}

	provision := func(c *client, i int, tag string) (time.Duration, error) {
		return c.provision(ctx, tag+strconv.Itoa(i), body())
	}
	catalog := func(c *client, _ int, _ string) (time.Duration, error) {
		start := time.Now()
		code, data, err := c.do(ctx, http.MethodGet, "/v2/catalog", nil)
		if err == nil && code != http.StatusOK {
			err = fmt.Errorf("catalog: %d %s", code, data)
		}
		return time.Since(start), err
	}

	// Steady: clients send n provisions, one after another each.
	cpu0 := cpuTime(pid)
	start := time.Now()
	var next atomic.Int64
	lat := make([]time.Duration, n)
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
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
	elapsed := time.Since(start)
	cpu := cpuTime(pid) - cpu0
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	rss, hwm := memory(pid)

	// Bursts: many requests at once, first each on a new connection, then
	// on connections already open; provisions, and catalog reads (no store
	// work) to show what the machine itself allows.
	bursts := []struct {
		name  string
		fresh bool
		send  func(c *client, i int, tag string) (time.Duration, error)
	}{
		{"provisions, each on a new connection", true, provision},
		{"catalog reads, each on a new connection (the floor: no store work)", true, catalog},
		{"provisions on connections already open", false, provision},
		{"catalog reads on connections already open (the floor)", false, catalog},
	}
	var rows []string
	for k, b := range bursts {
		bc := &client{base: c.base, http: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: burst}}}
		if !b.fresh {
			// Open burst connections and leave them idle in the pool.
			if _, err := bc.burst(ctx, burst, func(i int) (time.Duration, error) { return catalog(bc, i, "") }); err != nil {
				return err
			}
		}
		tag := fmt.Sprintf("burst%d-", k)
		res, err := bc.burst(ctx, burst, func(i int) (time.Duration, error) { return b.send(bc, i, tag) })
		bc.http.CloseIdleConnections()
		if err != nil {
			return err
		}
		rows = append(rows, fmt.Sprintf("| %d %s: latency p50 / p99, all answered in | %s / %s, %s |", burst, b.name,
			pct(res.lat, 50), pct(res.lat, 99), res.elapsed.Round(time.Millisecond)))
	}
	_, hwm2 := memory(pid)

	fmt.Printf("Local broker (the `make run` binary, bbolt with fsync on every commit), asynchronous provisions, 127.0.0.1:\n\n")
	fmt.Printf("| figure | value |\n| --- | ---: |\n")
	fmt.Printf("| %d provisions by %d clients: 202s per second | %.0f |\n", n, clients, float64(n)/elapsed.Seconds())
	fmt.Printf("| their latency p50 / p99 | %s / %s |\n", pct(lat, 50), pct(lat, 99))
	fmt.Printf("| broker CPU per provision (user + system) | %.2f ms |\n", float64(cpu.Microseconds())/1000/float64(n))
	for _, r := range rows {
		fmt.Println(r)
	}
	fmt.Printf("| broker RSS after the clients / peak after the bursts | %.1f MiB / %.1f MiB |\n", rss, max(hwm, hwm2))
	return nil
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
