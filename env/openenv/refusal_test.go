package openenv

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rawWS is a minimal WebSocket client on a bare TCP connection, so a test
// can see exactly when the server sends its first byte (gorilla's client
// cannot read again after a read deadline passes).
type rawWS struct {
	conn net.Conn
	br   *bufio.Reader
}

// dialRaw opens a WebSocket to /ws of the server at addr (host:port).
func dialRaw(t *testing.T, addr string) *rawWS {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	_, err = fmt.Fprintf(conn, "GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
		"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n", addr)
	require.NoError(t, err)
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	_ = conn.SetDeadline(time.Time{})
	return &rawWS{conn: conn, br: br}
}

// silentFor reports whether the server sends nothing for d.
func (r *rawWS) silentFor(d time.Duration) bool {
	_ = r.conn.SetReadDeadline(time.Now().Add(d))
	defer func() { _ = r.conn.SetReadDeadline(time.Time{}) }()
	_, err := r.br.Peek(1)
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// sendText writes one masked text frame (payload < 126 bytes).
func (r *rawWS) sendText(t *testing.T, payload string) {
	t.Helper()
	require.Less(t, len(payload), 126)
	mask := [4]byte{1, 2, 3, 4}
	b := []byte{0x81, 0x80 | byte(len(payload))}
	b = append(b, mask[:]...)
	for i := range len(payload) {
		b = append(b, payload[i]^mask[i%4])
	}
	_, err := r.conn.Write(b)
	require.NoError(t, err)
}

// readFrame reads one unfragmented, unmasked server frame.
func (r *rawWS) readFrame(t *testing.T) (opcode byte, payload []byte) {
	t.Helper()
	_ = r.conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	var h [2]byte
	_, err := io.ReadFull(r.br, h[:])
	require.NoError(t, err, "reading a frame header")
	require.Equal(t, byte(0x80), h[0]&0x80, "fragmented frame")
	n := int(h[1] & 0x7f)
	switch n {
	case 126:
		var ext [2]byte
		_, err = io.ReadFull(r.br, ext[:])
		require.NoError(t, err)
		n = int(binary.BigEndian.Uint16(ext[:]))
	case 127:
		t.Fatal("frame too big for this test")
	}
	payload = make([]byte, n)
	_, err = io.ReadFull(r.br, payload)
	require.NoError(t, err)
	return h[0] & 0x0f, payload
}

// TestCapacityRefusalAnswersFirstFrame drives raw clients against a full
// server. A client that sends its first frame at once or late (within
// RefusalWait) must get CAPACITY_REACHED as the answer to it, with nothing
// sent before (so a client such as Python's, which writes first, never
// finds a closed socket); one that sends nothing gets it unsolicited after
// RefusalWait. Every refusal ends with close 1000, and -slot-wait still
// holds a connection until a slot frees or the wait runs out.
func TestCapacityRefusalAnswersFirstFrame(t *testing.T) {
	tests := []struct {
		name        string
		slotWait    time.Duration
		delay       time.Duration // before the first frame; < 0: never sends
		unsolicited bool
	}{
		{name: "first frame at once", delay: 0},
		{name: "first frame late", delay: 400 * time.Millisecond},
		{name: "no first frame", delay: -1, unsolicited: true},
		{name: "slot wait runs out, frame at once", slotWait: 200 * time.Millisecond, delay: 0},
		{name: "slot wait runs out, frame late", slotWait: 200 * time.Millisecond, delay: 500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkGoroutines(t)
			_, hs := startServer(t, &echoFactory{}, WithMaxSessions(1), WithSlotWait(tt.slotWait))
			holder := dial(t, hs.URL)
			_, err := holder.Reset(ctxTimeout(t, 5*time.Second), nil)
			require.NoError(t, err)

			c := dialRaw(t, hs.Listener.Addr().String())
			start := time.Now()
			if tt.delay > 0 {
				assert.True(t, c.silentFor(tt.delay), "the server must wait for the first frame before refusing")
			}
			if tt.delay >= 0 {
				c.sendText(t, `{"type": "reset"}`)
			}
			op, payload := c.readFrame(t)
			require.Equal(t, byte(1), op, "a text frame, not %d: %q", op, payload)
			var f struct {
				Type string `json:"type"`
				Data struct {
					Code           string `json:"code"`
					Message        string `json:"message"`
					ActiveSessions int    `json:"active_sessions"`
					MaxSessions    int    `json:"max_sessions"`
				} `json:"data"`
			}
			require.NoError(t, json.Unmarshal(payload, &f))
			assert.Equal(t, "error", f.Type)
			assert.Equal(t, "CAPACITY_REACHED", f.Data.Code)
			assert.Equal(t, "Server at capacity: 1/1 sessions active. Cannot accept new connections.", f.Data.Message)
			assert.Equal(t, 1, f.Data.ActiveSessions)
			assert.Equal(t, 1, f.Data.MaxSessions)
			if tt.unsolicited {
				assert.GreaterOrEqual(t, time.Since(start), RefusalWait-50*time.Millisecond, "sent before RefusalWait")
			}
			if tt.slotWait > 0 {
				assert.GreaterOrEqual(t, time.Since(start), tt.slotWait, "refused before the slot wait ran out")
			}
			op, payload = c.readFrame(t)
			require.Equal(t, byte(8), op, "a close frame")
			require.GreaterOrEqual(t, len(payload), 2)
			assert.Equal(t, uint16(1000), binary.BigEndian.Uint16(payload))
		})
	}
}

// TestCapacityRefusalWithGoClient: the Go client's first call gets the
// refusal whether it is made at once or late.
func TestCapacityRefusalWithGoClient(t *testing.T) {
	checkGoroutines(t)
	_, hs := startServer(t, &echoFactory{}, WithMaxSessions(1))
	holder := dial(t, hs.URL)
	ctx := ctxTimeout(t, 10*time.Second)
	_, err := holder.Reset(ctx, nil)
	require.NoError(t, err)
	for _, delay := range []time.Duration{0, 300 * time.Millisecond, RefusalWait + 300*time.Millisecond} {
		t.Run(delay.String(), func(t *testing.T) {
			c := dial(t, hs.URL)
			time.Sleep(delay)
			_, err := c.Reset(ctx, nil)
			assert.ErrorIs(t, err, CodeCapacityReached)
			assert.False(t, strings.Contains(err.Error(), "session lost"), err.Error())
		})
	}
}
