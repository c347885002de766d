// Command trees is the Go goroutine baseline of R1-R3 (bench/trees/R_weft.c has
// weft's and what each benchmark does): one run of one benchmark per process, started
// by bench/trees/R_run.py, printing one line "RESULT {...}" in the same form.
//
//	fib     R1: a goroutine per call, no cutoff; the parent waits on a sync.WaitGroup
//	queens  R2: a goroutine per safe placement; the parent waits for all its children
//	        on a sync.WaitGroup and sums their counts
//	live    R3: n goroutines each blocked receiving from one channel; released by n
//	        sends (the channel is buffered, so each send is one "signal"), joined by a
//	        sync.WaitGroup
//
// P = GOMAXPROCS. A wrong result prints "WRONG RESULT" and exits 3. Peak RSS: VmHWM of
// /proc/self/status at exit.
//
//	usage: trees -bench fib|queens|live [-p 1] [-n N] [-reps 3]
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

func fib(n int64) int64 {
	if n < 2 {
		return n
	}
	var x int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { x = fib(n - 1); wg.Done() }()
	y := fib(n - 2)
	wg.Wait()
	return x + y
}

// Known N-queens solution counts, n = 0..16 (OEIS A000170).
var queensKnown = []int64{1, 1, 0, 0, 2, 10, 4, 40, 92, 352, 724, 2680, 14200, 73712, 365596, 2279184, 14772512}

var qn uint

func queens(row uint, cols, d1, d2 uint32) int64 {
	if row == qn {
		return 1
	}
	var r [16]int64
	var wg sync.WaitGroup
	k := 0
	for f := ^(cols | d1 | d2) & (1<<qn - 1); f != 0; f &= f - 1 {
		bit := f & -f
		wg.Add(1)
		go func(slot *int64) {
			*slot = queens(row+1, cols|bit, (d1|bit)<<1, (d2|bit)>>1)
			wg.Done()
		}(&r[k])
		k++
	}
	wg.Wait()
	var sum int64
	for i := 0; i < k; i++ {
		sum += r[i]
	}
	return sum
}

func queensSerial(row uint, cols, d1, d2 uint32, nodes *int64) int64 {
	if row == qn {
		return 1
	}
	var sum int64
	for f := ^(cols | d1 | d2) & (1<<qn - 1); f != 0; f &= f - 1 {
		bit := f & -f
		*nodes++
		sum += queensSerial(row+1, cols|bit, (d1|bit)<<1, (d2|bit)>>1, nodes)
	}
	return sum
}

// statusKiB returns the field name ("VmRSS", "VmHWM") of /proc/self/status in KiB, or -1.
func statusKiB(name string) int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), name+":"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err == nil {
				return kib
			}
		}
	}
	return -1
}

func machine() map[string]any {
	model := "unknown"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if i := strings.Index(l, ":"); i >= 0 {
					model = strings.TrimSpace(l[i+1:])
				}
				break
			}
		}
	}
	var u syscall.Utsname
	kernel := "unknown"
	if syscall.Uname(&u) == nil {
		var b []byte
		for _, c := range u.Release {
			if c == 0 {
				break
			}
			b = append(b, byte(c))
		}
		kernel = string(b)
	}
	return map[string]any{"cpu_model": model, "cores": runtime.NumCPU(), "kernel": kernel}
}

func wrong(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "WRONG RESULT: "+format+"\n", a...)
	os.Exit(3)
}

func emit(res map[string]any) {
	b, _ := json.Marshal(res)
	fmt.Printf("RESULT %s\n", b)
}

func runTree(bench string, p int, n int64, reps int) {
	var want, spawns int64
	var fn func() int64
	if bench == "fib" {
		if n < 0 || n > 60 {
			fmt.Fprintln(os.Stderr, "fib: -n must be in 0..60")
			os.Exit(1)
		}
		a, b := int64(0), int64(1)
		for i := int64(0); i < n; i++ {
			a, b = b, a+b
		}
		want, spawns = a, b-1
		fn = func() int64 { return fib(n) }
	} else {
		if n < 1 || n > 16 {
			fmt.Fprintln(os.Stderr, "queens: -n must be in 1..16")
			os.Exit(1)
		}
		qn = uint(n)
		want = queensSerial(0, 0, 0, 0, &spawns)
		if want != queensKnown[n] {
			wrong("serial queens found %d solutions, known %d", want, queensKnown[n])
		}
		fn = func() int64 { return queens(0, 0, 0, 0) }
	}
	rssStart := statusKiB("VmRSS")
	secs := []float64{}
	for r := -1; r < reps; r++ {
		t0 := time.Now()
		got := fn()
		d := time.Since(t0).Seconds()
		if got != want {
			wrong("%s: %d, expected %d", bench, got, want)
		}
		if r >= 0 {
			secs = append(secs, d)
		}
	}
	emit(map[string]any{"bench": bench, "lib": "go", "P": p, "n": n, "machine": machine(),
		"spawns": spawns, "result": want, "ok": true, "warmup_runs": 1, "seconds": secs,
		"rss_start_kib": rssStart, "peak_rss_kib": statusKiB("VmHWM")})
}

func runLive(p int, n int64) {
	gate := make(chan struct{}, n)
	allStarted := make(chan struct{})
	var started, finished atomic.Int64
	var wg sync.WaitGroup
	bad := make([]bool, n) // touched before the first reading, like weft's handle array
	for i := range bad {
		bad[i] = true
	}
	rssBefore := statusKiB("VmRSS")
	t0 := time.Now()
	wg.Add(int(n))
	for i := int64(0); i < n; i++ {
		go func(i int64) {
			if started.Add(1) == n {
				close(allStarted)
			}
			<-gate
			finished.Add(1)
			bad[i] = false
			wg.Done()
		}(i)
	}
	<-allStarted
	t1 := time.Now()
	rssBlocked := statusKiB("VmRSS")
	early := finished.Load()
	for i := int64(0); i < n; i++ {
		gate <- struct{}{}
	}
	wg.Wait()
	t2 := time.Now()
	if early != 0 {
		wrong("live: %d goroutines passed the channel before it was signalled (of %d)", early, n)
	}
	if finished.Load() != n {
		wrong("live: %d goroutines finished, expected %d", finished.Load(), n)
	}
	for i := range bad {
		if bad[i] {
			wrong("live: goroutine %d did not run (of %d)", i, n)
		}
	}
	emit(map[string]any{"bench": "live", "lib": "go", "P": p, "n": n, "machine": machine(),
		"threads": n, "ok": true, "create_s": t1.Sub(t0).Seconds(), "release_join_s": t2.Sub(t1).Seconds(),
		"rss_before_kib": rssBefore, "rss_blocked_kib": rssBlocked, "peak_rss_kib": statusKiB("VmHWM")})
}

func main() {
	bench := flag.String("bench", "", "fib|queens|live")
	p := flag.Int("p", 1, "GOMAXPROCS")
	n := flag.Int64("n", -1, "size (default: fib 30, queens 12, live 1000000)")
	reps := flag.Int("reps", 3, "timed runs after one warm-up (fib, queens)")
	flag.Parse()
	if *p < 1 || *reps < 1 {
		fmt.Fprintln(os.Stderr, "-p and -reps must be at least 1")
		os.Exit(1)
	}
	runtime.GOMAXPROCS(*p)
	defaults := map[string]int64{"fib": 30, "queens": 12, "live": 1000000}
	d, ok := defaults[*bench]
	if !ok {
		fmt.Fprintln(os.Stderr, "-bench fib|queens|live is required")
		os.Exit(1)
	}
	if *n < 0 {
		*n = d
	}
	if *bench == "live" {
		if *n < 1 {
			fmt.Fprintln(os.Stderr, "live: -n must be at least 1")
			os.Exit(1)
		}
		runLive(*p, *n)
	} else {
		runTree(*bench, *p, *n, *reps)
	}
}
