package openenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendPyFloat(t *testing.T) {
	tenth := 0.1 // a variable: constant arithmetic would be exact
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0.0"}, {1, "1.0"}, {-1, "-1.0"}, {0.5, "0.5"}, {1.1, "1.1"},
		{3 * tenth, "0.30000000000000004"}, {14 * tenth, "1.4000000000000001"},
		{123456789, "123456789.0"}, {1e16, "1e+16"}, {1.5e-5, "1.5e-05"}, {0.0001, "0.0001"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, string(appendPyFloat(nil, tt.in)), "%v", tt.in)
	}
}

func TestParseObservationDataRewards(t *testing.T) {
	tests := []struct {
		data   string
		reward *float64
		err    string
	}{
		{data: `{"observation":{},"reward":null,"done":false}`},
		{data: `{"observation":{}, "reward": 0.5, "done": true}`, reward: ptr(0.5)},
		{data: `{"observation":{},"reward":2,"done":false}`, reward: ptr(2)},
		{data: `{"observation":{},"reward":true,"done":false}`, reward: ptr(1)},
		{data: `{"observation":{},"reward":"x","done":false}`, err: "reward"},
		{data: `[1]`, err: "decode observation frame"},
	}
	for _, tt := range tests {
		res, err := parseObservationData(json.RawMessage(tt.data))
		if tt.err != "" {
			assert.ErrorContains(t, err, tt.err, tt.data)
			continue
		}
		require.NoError(t, err, tt.data)
		assert.Equal(t, tt.reward, res.Reward, tt.data)
	}
}

func ptr(f float64) *float64 { return &f }

// knownCodes are the codes handleFrame may answer with.
var knownCodes = map[string]bool{"INVALID_JSON": true, "UNKNOWN_TYPE": true, "VALIDATION_ERROR": true,
	"EXECUTION_ERROR": true, "SESSION_ERROR": true}

// FuzzHandleFrame feeds arbitrary bytes to the session's frame handler:
// it must never panic and must answer with a well-formed frame (or a
// bare close for {"type":"close"}).
func FuzzHandleFrame(f *testing.F) {
	for _, s := range []string{
		`{"type": "reset"}`, `{"type":"reset","data":{"seed":1}}`, `{"type":"step","data":{"message":"hi"}}`,
		`{"type":"step"}`, `{"type":"state","extra":1}`, `{"type":"close"}`, `{"data":{}}`, `{not json`,
		`[1, 2]`, `"str"`, `{"type":"mcp","data":{"jsonrpc":"2.0","id":7,"method":"tools/list"}}`,
		`{"type":5}`, `{"type":"step","data":null}`, `{"type":"step","data":{"message":"panic"}}`, ``, `{"type":"reset","type":"step","data":{}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		env := &echoEnv{}
		rep := handleFrame(context.Background(), env, msg)
		if rep.frame == nil {
			if !rep.closeAfter {
				t.Fatalf("no reply and no close for %q", msg)
			}
			return
		}
		var fr struct {
			Type string                     `json:"type"`
			Data map[string]json.RawMessage `json:"data"`
		}
		if err := json.Unmarshal(rep.frame, &fr); err != nil {
			t.Fatalf("reply is not a JSON frame: %v: %s", err, rep.frame)
		}
		switch fr.Type {
		case "observation":
			if _, err := parseObservationData(rep.frame[len(`{"type":"observation","data":`) : len(rep.frame)-1]); err != nil {
				t.Fatalf("bad observation frame: %v", err)
			}
		case "state", "mcp":
		case "error":
			var code string
			_ = json.Unmarshal(fr.Data["code"], &code)
			if !knownCodes[code] {
				t.Fatalf("unexpected code %q in %s", code, rep.frame)
			}
			if (code == "SESSION_ERROR") != rep.closeAfter {
				t.Fatalf("close after %s = %v", code, rep.closeAfter)
			}
		default:
			t.Fatalf("unexpected frame type %q: %s", fr.Type, rep.frame)
		}
	})
}

// TestReplayHTTP replays the recorded HTTP exchanges of the Python server
// against ours (the echo test env answers like upstream's echo_env).
func TestReplayHTTP(t *testing.T) {
	checkGoroutines(t)
	var rec struct {
		Exchanges []struct {
			Method     string              `json:"method"`
			Path       string              `json:"path"`
			Request    json.RawMessage     `json:"request"`
			RequestRaw *string             `json:"request_raw"`
			Status     int                 `json:"status"`
			Response   json.RawMessage     `json:"response"`
			Paths      map[string][]string `json:"paths"` // /openapi.json: paths and methods only
		} `json:"exchanges"`
	}
	b, err := readTestdata("http.json")
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &rec))
	_, hs := startServer(t, &echoFactory{})
	n := 0
	for _, ex := range rec.Exchanges {
		n++
		var body io.Reader
		switch {
		case ex.RequestRaw != nil:
			body = strings.NewReader(*ex.RequestRaw)
		case ex.Request != nil:
			body = strings.NewReader(string(ex.Request))
		}
		req, err := http.NewRequest(ex.Method, hs.URL+ex.Path, body)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		where := ex.Method + " " + ex.Path + " " + string(ex.Request)
		assert.Equal(t, ex.Status, resp.StatusCode, where)
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), where)
		var want, have map[string]any
		require.NoError(t, json.Unmarshal(got, &have), "%s: %s", where, got)
		if ex.Path == "/openapi.json" { // the same paths and methods
			paths := map[string][]string{}
			for p, ops := range have["paths"].(map[string]any) {
				for m := range ops.(map[string]any) {
					paths[p] = append(paths[p], m)
				}
			}
			assert.Equal(t, ex.Paths, paths, where)
			continue
		}
		require.NoError(t, json.Unmarshal(ex.Response, &want))
		switch {
		case ex.Path == "/health":
			assert.Equal(t, "healthy", have["status"])
			assert.Contains(t, have, "max_sessions")
		case ex.Path == "/schema":
			assert.Equal(t, want["state"], have["state"], "the base State schema")
			assert.Contains(t, have, "action")
			assert.Contains(t, have, "observation")
		case ex.Path == "/state":
			assert.Contains(t, have, "episode_id")
			assert.Equal(t, want["step_count"], have["step_count"])
		case ex.RequestRaw != nil: // json_invalid: Python's decoder wording differs
			w, h := want["detail"].([]any)[0].(map[string]any), have["detail"].([]any)[0].(map[string]any)
			assert.Equal(t, w["type"], h["type"], where)
			assert.Equal(t, w["msg"], h["msg"], where)
		default:
			assert.Equal(t, want, have, where)
		}
	}
	assert.Equal(t, 19, n, "exchanges replayed")

	for _, tt := range []struct {
		method, path string
		status       int
		body         string
	}{
		{"POST", "/health", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/reset", 405, `{"detail":"Method Not Allowed"}`},
		{"GET", "/nope", 404, `{"detail":"Not Found"}`},
		{"POST", "/reset", 422, `{"detail":[{"type":"model_attributes_type","loc":["body"],"msg":"Input should be a valid dictionary or object to extract fields from","input":[1]}]}`},
		{"POST", "/step", 422, `{"detail":[{"type":"dict_type","loc":["body","action"],"msg":"Input should be a valid dictionary","input":"x"}]}`},
	} {
		var body io.Reader
		switch tt.path {
		case "/reset":
			body = strings.NewReader(`[1]`)
		case "/step":
			body = strings.NewReader(`{"action":"x"}`)
		}
		req, err := http.NewRequest(tt.method, hs.URL+tt.path, body)
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, tt.status, resp.StatusCode, tt.method+" "+tt.path)
		assert.JSONEq(t, tt.body, string(got), tt.method+" "+tt.path)
	}
}

func readTestdata(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join("testdata", name))
}

// TestClientAgainstRecordedServer runs our Client against a fake server
// that answers with the exact frames the Python server sent, after checking
// that each request equals (as JSON) what the Python client sent.
func TestClientAgainstRecordedServer(t *testing.T) {
	for _, name := range []string{"ws_session.json", "wordle.json", "ws_idle_reaper.json"} {
		t.Run(name, func(t *testing.T) {
			checkGoroutines(t)
			tr := loadTranscript(t, name)
			var script []recordedExchange
			for _, f := range tr.Frames {
				if f.Conn != "A" || f.SentRaw == nil || f.RecvRaw == nil {
					continue
				}
				ms, err := parseObject([]byte(*f.SentRaw))
				if err != nil {
					continue // frames only a broken client sends
				}
				var fr frame
				require.NoError(t, json.Unmarshal([]byte(*f.SentRaw), &fr))
				ok := len(ms) == 1 || len(ms) == 2 && fr.Data != nil
				if !ok || (fr.Type != "reset" && fr.Type != "step" && fr.Type != "state") || (fr.Type == "step" && fr.Data == nil) ||
					(fr.Type == "state" && len(ms) != 1) || (fr.Type == "step" && fr.Data[0] != '{') {
					continue
				}
				script = append(script, recordedExchange{fr, *f.RecvRaw})
			}
			require.NotEmpty(t, script)
			mismatch := make(chan string, len(script)+1)
			served := make(chan struct{})
			hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(served)
				ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
				if err != nil {
					return
				}
				defer ws.Close()
				for _, ex := range script {
					_, msg, err := ws.ReadMessage()
					if err != nil {
						mismatch <- "read: " + err.Error()
						return
					}
					want, _ := json.Marshal(ex.sent)
					if !jsonEqual(want, msg) {
						mismatch <- "sent " + string(msg) + ", Python sent " + string(want)
					}
					if err := ws.WriteMessage(websocket.TextMessage, []byte(ex.recv)); err != nil {
						return
					}
				}
				_, msg, err := ws.ReadMessage() // the client's {"type":"close"}
				if err == nil && string(msg) != `{"type":"close"}` {
					mismatch <- "expected close, got " + string(msg)
				}
			}))
			defer hs.Close()
			c, err := Dial(t.Context(), hs.URL)
			require.NoError(t, err)
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			for i, ex := range script {
				var fr struct {
					Type string                     `json:"type"`
					Data map[string]json.RawMessage `json:"data"`
				}
				require.NoError(t, json.Unmarshal([]byte(ex.recv), &fr))
				var err error
				var res Result
				var st json.RawMessage
				switch ex.sent.Type {
				case "reset":
					var opts any
					if ex.sent.Data != nil {
						opts = ex.sent.Data
					}
					res, err = c.Reset(ctx, opts)
				case "step":
					res, err = c.Step(ctx, ex.sent.Data)
				case "state":
					st, err = c.State(ctx)
				}
				where := fmt.Sprintf("exchange %d %s", i, ex.sent.Data)
				switch fr.Type {
				case "error":
					var se *ServerError
					require.ErrorAs(t, err, &se, where)
					var code, msg string
					_ = json.Unmarshal(fr.Data["code"], &code)
					_ = json.Unmarshal(fr.Data["message"], &msg)
					assert.Equal(t, ErrorCode(code), se.Code, where)
					assert.Equal(t, msg, se.Message, where)
					if code == "VALIDATION_ERROR" {
						assert.NotEmpty(t, se.Errors, where)
					}
				case "state":
					require.NoError(t, err, where)
					assert.True(t, jsonEqual(ex.recvData(), st), where)
				default:
					require.NoError(t, err, where)
					assert.True(t, jsonEqual(fr.Data["observation"], res.Observation), where)
					var wantReward *float64
					_ = json.Unmarshal(fr.Data["reward"], &wantReward)
					assert.Equal(t, wantReward, res.Reward, where)
					var done bool
					_ = json.Unmarshal(fr.Data["done"], &done)
					assert.Equal(t, done, res.Done, where)
				}
			}
			require.NoError(t, c.Close())
			<-served
			close(mismatch)
			for m := range mismatch {
				t.Error(m)
			}
		})
	}
}

// recordedExchange is one request the Python client sent and the frame
// the Python server answered.
type recordedExchange struct {
	sent frame
	recv string
}

// recvData is the data object of the recorded reply.
func (e recordedExchange) recvData() json.RawMessage {
	var f frame
	_ = json.Unmarshal([]byte(e.recv), &f)
	return f.Data
}

// jsonEqual compares two JSON texts as values.
func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// FuzzParseReply feeds arbitrary bytes to the client's decoding of server
// frames: it must never panic, and an error frame always yields a
// ServerError with some code.
func FuzzParseReply(f *testing.F) {
	for _, s := range []string{
		`{"type":"observation","data":{"observation":{"a":1},"reward":0.0,"done":false}}`,
		`{"type": "observation", "data": {"observation": {}, "reward": null, "done": true}}`,
		`{"type":"error","data":{"message":"Server at capacity: 1/1 sessions active. Cannot accept new connections.","code":"CAPACITY_REACHED","active_sessions":1,"max_sessions":1}}`,
		`{"type":"error","data":{"message":"Invalid message","code":"VALIDATION_ERROR","errors":[{"type":"missing","loc":["message"],"msg":"Field required","input":{}}]}}`,
		`{"type":"state","data":{"episode_id":null,"step_count":0}}`, `{"type":"error","data":[]}`, `{"type":"observation","data":{"reward":true}}`, `[]`, `x`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		var fr frame
		if json.Unmarshal(raw, &fr) != nil {
			return
		}
		switch fr.Type {
		case "observation":
			if res, err := parseObservationData(fr.Data); err == nil {
				if _, perr := parseObject(res.Observation); perr != nil {
					t.Fatalf("accepted an observation that is not an object: %q", res.Observation)
				}
			}
		case "error":
			se := parseServerError(fr.Data)
			if !strings.Contains(se.Error(), "(code: "+string(se.Code)+")") {
				t.Fatalf("error text %q lacks its code", se.Error())
			}
			var target *ServerError
			if err := unsolicitedError(raw); !errors.As(err, &target) {
				t.Fatalf("error frame not reported as a ServerError: %v", err)
			}
		}
	})
}

// parseObjectReference is the obvious json.Decoder version of parseObject.
func parseObjectReference(b []byte) ([]member, error) {
	var probe any
	pd := json.NewDecoder(bytes.NewReader(b))
	pd.UseNumber() // 1E1000 is valid JSON, just not a float64
	if err := pd.Decode(&probe); err != nil || !json.Valid(b) {
		return nil, errors.Join(err, errors.New("invalid JSON"))
	}
	if _, ok := probe.(map[string]any); !ok {
		return nil, errNotObject{}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	_, _ = dec.Token()
	var ms []member
	for dec.More() {
		tok, _ := dec.Token()
		key := tok.(string)
		var v json.RawMessage
		_ = dec.Decode(&v)
		found := false
		for i := range ms {
			if ms[i].Key == key {
				ms[i].Value, found = v, true
			}
		}
		if !found {
			ms = append(ms, member{key, v})
		}
	}
	return ms, nil
}

// FuzzParseObject checks the scanning parseObject against the decoder
// version on arbitrary input.
func FuzzParseObject(f *testing.F) {
	for _, s := range []string{`{}`, ` { "a" : 1 , "b":[1,{"c":"]}"}], "a": "x\\"y" } `, `{"\u0061":true,"n":null,"f":-1.5e3}`,
		`[1]`, `"s"`, `{bad`, `{"a":{"b":{}}}`, "\t{\"k\"\n:\r\"v\"}\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := parseObject(b)
		want, werr := parseObjectReference(b)
		if (err == nil) != (werr == nil) {
			t.Fatalf("error mismatch for %q: %v vs %v", b, err, werr)
		}
		if err != nil {
			var a, c errNotObject
			if errors.As(err, &a) != errors.As(werr, &c) {
				t.Fatalf("not-object mismatch for %q: %v vs %v", b, err, werr)
			}
			return
		}
		if len(got) != len(want) {
			t.Fatalf("%q: %d members, want %d", b, len(got), len(want))
		}
		for i := range got {
			if got[i].Key != want[i].Key || !bytes.Equal(bytes.TrimSpace(got[i].Value), bytes.TrimSpace(want[i].Value)) {
				t.Fatalf("%q: member %d = %q:%q, want %q:%q", b, i, got[i].Key, got[i].Value, want[i].Key, want[i].Value)
			}
		}
	})
}
