package openenv

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// transcript is one recorded scenario from the real Python server
// (testdata/*.json, copied from shared/openenv/transcripts).
type transcript struct {
	Scenario         string   `json:"scenario"`
	SessionsAccepted int      `json:"sessions_accepted"`
	Frames           []tFrame `json:"frames"`
}

type tFrame struct {
	Conn          string          `json:"conn"`
	Event         string          `json:"event"`
	Text          string          `json:"text"`
	Note          string          `json:"note"`
	SentRaw       *string         `json:"sent_raw"`
	Sent          json.RawMessage `json:"sent"`
	SentBinaryHex string          `json:"sent_binary_hex"`
	SentNote      string          `json:"sent_note"`
	RecvRaw       *string         `json:"recv_raw"`
	Code          int             `json:"code"`
	Closed        *struct {
		Received int `json:"close_code_received"`
	} `json:"closed"`
}

func loadTranscript(t *testing.T, name string) transcript {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	var tr transcript
	require.NoError(t, json.Unmarshal(b, &tr), name)
	return tr
}

var episodeIDRe = regexp.MustCompile(`"episode_id":"[^"]*"`)

// assertSameFrame compares our frame with the recorded one: byte for byte
// once episode ids (random uuids upstream) are masked. Two messages are
// Python-internal text upstream and deliberately clearer here: the JSON
// decoder's wording of INVALID_JSON and SESSION_ERROR's text; for those
// the code, the "Invalid JSON: " prefix and every other field must match.
func assertSameFrame(t *testing.T, want, got string, where string) {
	t.Helper()
	var w, g map[string]any
	require.NoError(t, json.Unmarshal([]byte(want), &w), where)
	require.NoError(t, json.Unmarshal([]byte(got), &g), "%s: our frame is not JSON: %s", where, got)
	if w["type"] == "error" {
		wd, gd := w["data"].(map[string]any), g["data"].(map[string]any)
		switch wd["code"] {
		case "INVALID_JSON":
			assert.True(t, strings.HasPrefix(gd["message"].(string), "Invalid JSON: "), "%s: %v", where, gd["message"])
			wd["message"], gd["message"] = "", ""
			assert.Equal(t, w, g, where)
			return
		case "SESSION_ERROR":
			assert.NotEmpty(t, gd["message"], where)
			wd["message"], gd["message"] = "", ""
			assert.Equal(t, w, g, where)
			return
		}
	}
	mask := func(s string) string { return episodeIDRe.ReplaceAllString(s, `"episode_id":"X"`) }
	assert.Equal(t, mask(want), mask(got), where)
}

// TestReplayServerTranscripts plays the client side of every recorded
// WebSocket scenario against our server with the echo test env and checks
// each reply, unsolicited frame and close code.
func TestReplayServerTranscripts(t *testing.T) {
	for _, name := range []string{"ws_session.json", "ws_disconnect.json", "ws_limits.json", "ws_capacity_max1.json", "ws_capacity_max2.json"} {
		t.Run(name, func(t *testing.T) {
			tr := loadTranscript(t, name)
			var opts []ServerOption
			if tr.SessionsAccepted > 0 {
				opts = append(opts, WithMaxSessions(tr.SessionsAccepted))
			}
			srv := NewServer(&echoFactory{}, opts...)
			hs := httptest.NewServer(srv)
			defer hs.Close()
			wsURL := "ws" + strings.TrimPrefix(hs.URL, "http") + "/ws"
			conns := map[string]*websocket.Conn{}
			open := map[string]bool{}
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			read := func(c *websocket.Conn) (int, []byte, error) {
				_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
				return c.ReadMessage()
			}
			expectClose := func(c *websocket.Conn, code int, where string) {
				for {
					_, msg, err := read(c)
					if err != nil {
						var ce *websocket.CloseError
						require.ErrorAs(t, err, &ce, where)
						assert.Equal(t, code, ce.Code, where)
						return
					}
					t.Fatalf("%s: expected close %d, got frame %s", where, code, msg)
				}
			}
			for i, f := range tr.Frames {
				where := fmt.Sprintf("%s frame %d (conn %s)", name, i, f.Conn)
				c := conns[f.Conn]
				switch {
				case f.Event == "open":
					ws, _, err := websocket.DefaultDialer.Dial(wsURL, nil)
					require.NoError(t, err, where)
					conns[f.Conn], open[f.Conn] = ws, true
				case f.Event == "note":
					if strings.Contains(f.Text, "waiting") { // a closed session must free its slot
						n := 0
						for _, o := range open {
							if o {
								n++
							}
						}
						require.Eventually(t, func() bool { return srv.ActiveSessions() <= n }, 2*time.Second, time.Millisecond, where)
					}
				case f.Event == "tcp_abort":
					require.NoError(t, c.NetConn().Close())
					open[f.Conn] = false
				case f.Event == "client_close":
					_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(f.Code, ""), time.Now().Add(time.Second))
					expectClose(c, f.Code, where)
					open[f.Conn] = false
				case f.SentNote != "": // the 17 MiB frame
					big := `{"type": "step", "data": {"message": "` + strings.Repeat("a", 17<<20) + `"}}`
					_ = c.WriteMessage(websocket.TextMessage, []byte(big))
					expectClose(c, f.Closed.Received, where)
					open[f.Conn] = false
				case f.SentRaw != nil || f.SentBinaryHex != "":
					if f.SentBinaryHex != "" {
						b, err := hex.DecodeString(f.SentBinaryHex)
						require.NoError(t, err)
						require.NoError(t, c.WriteMessage(websocket.BinaryMessage, b), where)
					} else {
						_ = c.WriteMessage(websocket.TextMessage, []byte(*f.SentRaw)) // may fail once the server has closed
					}
					switch {
					case f.RecvRaw != nil:
						mt, got, err := read(c)
						require.NoError(t, err, where)
						assert.Equal(t, websocket.TextMessage, mt)
						assertSameFrame(t, *f.RecvRaw, string(got), where+" "+string(f.Sent)+f.SentBinaryHex)
					case f.Closed != nil:
						expectClose(c, f.Closed.Received, where)
						open[f.Conn] = false
					case f.SentRaw != nil && strings.Contains(*f.SentRaw, `"close"`):
						expectClose(c, websocket.CloseNormalClosure, where)
						open[f.Conn] = false
					}
				case f.RecvRaw != nil: // unsolicited or pipelined replies
					_, got, err := read(c)
					require.NoError(t, err, where)
					assertSameFrame(t, *f.RecvRaw, string(got), where)
				case f.Closed != nil:
					expectClose(c, f.Closed.Received, where)
					open[f.Conn] = false
				default:
					t.Fatalf("%s: frame not understood: %+v", where, f)
				}
			}
			require.NoError(t, srv.Shutdown(t.Context()))
		})
	}
}
