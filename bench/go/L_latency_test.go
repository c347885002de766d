// Go goroutine baseline for the latency rows L1-L8 (BENCHMARKS.md lists Go
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

// L4: uncontested sync.Mutex Lock+Unlock; uncontested channel semaphore signal+wait
// (Go has no counting semaphore in the standard library: a buffered channel of capacity
// 1 is one, signal = send, wait = receive).
func BenchmarkL4Mutex(b *testing.B) {
	var m sync.Mutex
	for i := 0; i < b.N; i++ {
		m.Lock()
		m.Unlock()
	}
}

func BenchmarkL4Sem(b *testing.B) {
	s := make(chan struct{}, 1)
	for i := 0; i < b.N; i++ {
		s <- struct{}{}
		<-s
	}
}

// L5: succeeding TryLock + Unlock; succeeding non-blocking receive + send.
func BenchmarkL5TryLock(b *testing.B) {
	var m sync.Mutex
	for i := 0; i < b.N; i++ {
		if !m.TryLock() {
			b.Fatal("TryLock failed")
		}
		m.Unlock()
	}
}

func BenchmarkL5TryWait(b *testing.B) {
	s := make(chan struct{}, 1)
	s <- struct{}{}
	for i := 0; i < b.N; i++ {
		select {
		case <-s:
		default:
			b.Fatal("trywait failed")
		}
		s <- struct{}{}
	}
}

// L6 mutex ping-pong: the three-mutex hand-over-hand pattern of bench/latency/pingpong.h
// (Go lets any goroutine unlock a mutex, but the pattern is kept the same). One op = one
// round (a step of each goroutine).
func BenchmarkL6MutexPingPong(b *testing.B) {
	var m [3]sync.Mutex
	var stop atomic.Bool
	ready, done := make(chan struct{}), make(chan struct{})
	m[0].Lock()
	m[1].Lock()
	go func() {
		older := 2
		m[older].Lock()
		close(ready)
		for {
			next := (older + 1) % 3
			m[next].Lock()
			if stop.Load() {
				m[next].Unlock()
				m[older].Unlock()
				close(done)
				return
			}
			m[older].Unlock()
			older = next
		}
	}()
	<-ready
	aOlder := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m[aOlder].Unlock()
		m[(aOlder+2)%3].Lock()
		aOlder = (aOlder + 1) % 3
	}
	b.StopTimer()
	stop.Store(true)
	m[aOlder].Unlock()
	m[(aOlder+1)%3].Unlock()
	<-done
}

// L6 semaphore ping-pong with channel semaphores: A signal(s1); wait(s2) / B wait(s1);
// signal(s2). One op = one round.
func BenchmarkL6SemPingPong(b *testing.B) {
	s1, s2 := make(chan struct{}, 1), make(chan struct{}, 1)
	go func() {
		for range s1 {
			s2 <- struct{}{}
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s1 <- struct{}{}
		<-s2
	}
	b.StopTimer()
	close(s1)
}

// L7: PingPong of C-Threads §5.1 with sync.Mutex + sync.Cond and a turn variable.
// One op = one round.
func BenchmarkL7CondPingPong(b *testing.B) {
	var m sync.Mutex
	c := sync.NewCond(&m)
	turn, stop := 0, false
	done := make(chan struct{})
	go func() {
		for {
			m.Lock()
			for turn != 1 && !stop {
				c.Wait()
			}
			if stop {
				m.Unlock()
				close(done)
				return
			}
			turn = 0
			c.Signal()
			m.Unlock()
		}
	}()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		m.Lock()
		for turn != 0 {
			c.Wait()
		}
		turn = 1
		c.Signal()
		m.Unlock()
	}
	b.StopTimer()
	m.Lock()
	stop = true
	c.Signal()
	m.Unlock()
	<-done
}
