// Go goroutine baseline for the latency rows L1, L2, L3 and L8 (BENCHMARKS.md lists Go
// goroutines among the L1-L7 baselines). Run on one worker, as weft's rows are:
//
//	go test -run '^$' -bench . -cpu 1 -count 5 -benchtime 0.2s
//
// Each benchmark reports ns/op per thread operation, timed as in bench/latency/*.cc.
package gobench

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

const batch = 1000

// L1: create goroutines that have not run yet. Timed: a batch of 1000 `go` statements
// on one P; the creator does not block, so none runs. Not timed: letting them run.
func BenchmarkL1Create(b *testing.B) {
	var wg sync.WaitGroup
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		wg.Add(n)
		for i := 0; i < n; i++ {
			go func() { wg.Done() }()
		}
		b.StopTimer()
		wg.Wait()
		b.StartTimer()
	}
}

// L2: create + run + finish of an empty goroutine, control back to the creator. Timed:
// `go` + wg.Wait() (the creator parks, the goroutine runs and wakes it).
func BenchmarkL2NullThread(b *testing.B) {
	var wg sync.WaitGroup
	for i := 0; i < b.N; i++ {
		wg.Add(1)
		go func() { wg.Done() }()
		wg.Wait()
	}
}

// L3: two goroutines on one P yield to each other with runtime.Gosched(). Timed: b.N/2
// yields of the benchmark goroutine; reported: time / (yields of both goroutines).
func BenchmarkL3Switch(b *testing.B) {
	var stop atomic.Bool
	count := make(chan int)
	go func() {
		n := 0
		for !stop.Load() {
			runtime.Gosched()
			n++
		}
		count <- n
	}()
	runtime.Gosched() // let the partner start
	b.ResetTimer()
	for i := 0; i < b.N/2; i++ {
		runtime.Gosched()
	}
	b.StopTimer()
	elapsed := b.Elapsed()
	stop.Store(true)
	yields := b.N/2 + <-count
	if yields > 0 {
		b.ReportMetric(float64(elapsed.Nanoseconds())/float64(yields), "ns/op")
	}
}

// L8: create + reclaim goroutines that never started (as weft's L8: Go cannot delete a
// goroutine either). Timed: a batch of 1000 `go` statements, then running them all.
func BenchmarkL8CreateReclaim(b *testing.B) {
	var wg sync.WaitGroup
	for done := 0; done < b.N; done += batch {
		n := min(batch, b.N-done)
		wg.Add(n)
		for i := 0; i < n; i++ {
			go func() { wg.Done() }()
		}
		wg.Wait()
	}
}
