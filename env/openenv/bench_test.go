package openenv

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// raiseFileLimit lifts RLIMIT_NOFILE towards need (each session holds two
// sockets in this single-process benchmark).
func raiseFileLimit(b *testing.B, need uint64) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		b.Fatalf("getrlimit: %v", err)
	}
	if lim.Cur >= need {
		return
	}
	lim.Cur = min(need, lim.Max)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < need {
		b.Fatalf("need %d open files, limit is %d (%v): raise ulimit -n", need, lim.Cur, err)
	}
}

// heapAndStacks is the memory a set of idle sessions holds.
func heapAndStacks() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// BenchmarkServer drives the echo test env over loopback WebSockets with
// 1, 64 and 1024 concurrent sessions (client and server in this process):
// steps/s and episodes/s (each op is one round trip; every tenth is a
// reset, so an episode is a reset and 9 steps), and the memory one idle
// session costs both ends together. Any refused or lost session fails the
// benchmark.
//
//	go test -run '^$' -bench BenchmarkServer -benchtime 20000x ./env/openenv/
func BenchmarkServer(b *testing.B) {
	for _, sessions := range []int{1, 64, 1024} {
		b.Run(fmt.Sprintf("sessions=%d", sessions), func(b *testing.B) {
			raiseFileLimit(b, uint64(2*sessions+256))
			srv := NewServer(&echoFactory{}, WithMaxSessions(sessions))
			hs := httptest.NewServer(srv)
			defer hs.Close()
			defer srv.Shutdown(context.Background())
			ctx := context.Background()

			base := heapAndStacks()
			clients := make([]*Client, sessions)
			for i := range clients {
				c, err := Dial(ctx, hs.URL, WithMessageTimeout(time.Minute))
				if err != nil {
					b.Fatalf("dial session %d: %v", i, err)
				}
				defer c.Close()
				if _, err := c.Reset(ctx, nil); err != nil {
					b.Fatalf("reset session %d: %v", i, err)
				}
				clients[i] = c
			}
			perSession := float64(heapAndStacks()-base) / float64(sessions)
			if got := srv.ActiveSessions(); got != sessions {
				b.Fatalf("%d sessions active, want %d", got, sessions)
			}

			action := json.RawMessage(`{"message":"hello"}`)
			var next, episodes atomic.Int64
			var failed atomic.Value
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			var wg sync.WaitGroup
			for _, c := range clients {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for n := 1; next.Add(1) <= int64(b.N); n++ {
						var err error
						if n%10 == 0 {
							_, err = c.Reset(ctx, nil)
							episodes.Add(1)
						} else {
							_, err = c.Step(ctx, action)
						}
						if err != nil {
							failed.Store(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			elapsed := time.Since(start).Seconds()
			b.StopTimer()
			if err, ok := failed.Load().(error); ok {
				b.Fatalf("lost an episode: %v", err)
			}
			b.ReportMetric(float64(int64(b.N)-episodes.Load())/elapsed, "steps/s")
			b.ReportMetric(float64(episodes.Load())/elapsed, "episodes/s")
			b.ReportMetric(perSession, "B/idle-session")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkHandleFrame is the server's work on one frame without the
// socket: parse, call the echo test env, build the reply frame.
//
//	go test -run '^$' -bench BenchmarkHandleFrame -benchmem ./env/openenv/
func BenchmarkHandleFrame(b *testing.B) {
	for _, tt := range []struct{ name, frame string }{
		{"step", `{"type":"step","data":{"message":"hello"}}`},
		{"reset", `{"type":"reset"}`},
		{"state", `{"type":"state"}`},
	} {
		b.Run(tt.name, func(b *testing.B) {
			env, err := (&echoFactory{}).NewEnvironment(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			msg := []byte(tt.frame)
			b.ReportAllocs()
			for b.Loop() {
				if rep := handleFrame(context.Background(), env, msg); rep.frame == nil {
					b.Fatal("no reply frame")
				}
			}
		})
	}
}
