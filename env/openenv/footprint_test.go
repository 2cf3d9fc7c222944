package openenv

import (
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestIdleSessionFootprint opens sessions with bare gorilla clients (no
// goroutine and a 256-byte buffer each), resets each, and checks what an
// idle session costs: exactly one server goroutine (net/http's connection
// goroutine has returned, and keepalive and reaper are a timer), and at
// most 20 KiB of heap and stack for both ends together. envload measures
// the server's VmRSS the same way (see BENCHMARKS.md).
func TestIdleSessionFootprint(t *testing.T) {
	const n = 256
	checkGoroutines(t)
	srv, hs := startServer(t, &echoFactory{}, WithMaxSessions(n+1))
	wsURL := "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
	dialer := &websocket.Dialer{ReadBufferSize: 256, WriteBufferSize: 256, WriteBufferPool: &sync.Pool{}}

	// One session first, so that lazily built server state is not counted.
	warm, _, err := dialer.Dial(wsURL, nil)
	require.NoError(t, err)
	defer warm.Close()
	require.NoError(t, warm.WriteMessage(websocket.TextMessage, []byte(`{"type":"reset"}`)))
	_, _, err = warm.ReadMessage()
	require.NoError(t, err)
	http.DefaultClient.CloseIdleConnections()

	settle := func() (goroutines int, mem uint64) {
		// Wait for the goroutine count to stop moving (connection
		// goroutines returning), then measure.
		prev := -1
		for range 100 {
			runtime.GC()
			if g := runtime.NumGoroutine(); g == prev {
				break
			} else {
				prev = g
			}
			time.Sleep(10 * time.Millisecond)
		}
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return runtime.NumGoroutine(), m.HeapInuse + m.StackInuse
	}
	g0, m0 := settle()
	conns := make([]*websocket.Conn, n)
	for i := range conns {
		c, _, err := dialer.Dial(wsURL, nil)
		require.NoError(t, err, "session %d", i)
		defer c.Close()
		require.NoError(t, c.WriteMessage(websocket.TextMessage, []byte(`{"type":"reset"}`)))
		_, msg, err := c.ReadMessage()
		require.NoError(t, err)
		require.Contains(t, string(msg), `"type":"observation"`)
		conns[i] = c
	}
	g1, m1 := settle()
	require.Equal(t, n+1, srv.ActiveSessions())

	perSession := float64(m1-m0) / n
	t.Logf("idle session: %.2f goroutines, %.1f KiB heap+stack (server and client)", float64(g1-g0)/n, perSession/1024)
	assert.Equal(t, n, g1-g0, "server goroutines per idle session")
	assert.LessOrEqual(t, perSession, 20.0*1024, "bytes of heap and stack per idle session, both ends")
}
