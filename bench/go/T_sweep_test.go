package gobench

// Go goroutine baseline for the throughput rows T1 and T5 (bench/sweep/sweep.c), one
// P per `-cpu` value (GOMAXPROCS):
//
//	go test -run '^$' -bench 'T1|T5' -cpu 1,2,4 -count 5 -benchtime 1000000x
//
// ns/op is per goroutine.

import (
	"runtime"
	"sync"
	"testing"
)

// T1: GOMAXPROCS chains of goroutines, each creating its successor and finishing; b.N
// goroutines in all. Timed: until the last goroutine of the last chain has finished.
func BenchmarkT1Chains(b *testing.B) {
	p := runtime.GOMAXPROCS(0)
	var wg sync.WaitGroup
	var step func(left int)
	step = func(left int) {
		if left > 1 {
			go step(left - 1)
		} else {
			wg.Done()
		}
	}
	wg.Add(p)
	for i := 0; i < p; i++ {
		k := b.N / p
		if i < b.N%p {
			k++
		}
		if k == 0 {
			wg.Done()
			continue
		}
		go step(k)
	}
	wg.Wait()
}

// T5: fork-join, b.N empty goroutines started in batches of 1000, each batch waited for.
func BenchmarkT5ForkJoin(b *testing.B) {
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
