package wordle

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync/atomic"

	"github.com/x/env/internal/pyjson"
	"github.com/x/env/openenv"
)

// Options configure the games a factory makes.
type Options struct {
	// Seed seeds the secret words and episode ids.
	Seed uint64
	// Dictionary is the word list; nil means DefaultDictionary().
	Dictionary *Dictionary
}

func (o Options) dict() *Dictionary {
	if o.Dictionary != nil {
		return o.Dictionary
	}
	return DefaultDictionary()
}

// EnvironmentFactory makes Wordle Environments for an openenv server. It
// is safe for concurrent use.
type EnvironmentFactory struct {
	opts Options
	n    atomic.Uint64
}

// NewEnvironmentFactory returns a factory for serving Wordle over OpenEnv
// as textarena_env does.
func NewEnvironmentFactory(opts Options) *EnvironmentFactory {
	return &EnvironmentFactory{opts: opts}
}

// NewEnvironment makes one session's environment.
func (f *EnvironmentFactory) NewEnvironment(ctx context.Context) (openenv.Environment, error) {
	return NewEnvironment(f.opts.dict(), pyjson.Seeds(f.opts.Seed, f.n.Add(1)-1)), nil
}

// Metadata is what the Python server reports.
func (f *EnvironmentFactory) Metadata() openenv.Metadata {
	return openenv.Metadata{Name: "TextArenaEnvironment", Description: "TextArenaEnvironment environment", Version: "1.0.0"}
}

// ActionSchema is the schema of TextArenaAction.
func (f *EnvironmentFactory) ActionSchema() json.RawMessage {
	return json.RawMessage(`{"additionalProperties":false,"description":"Action submitted by an agent to a TextArena environment.","properties":{"metadata":{"additionalProperties":true,"description":"Additional metadata for the action","title":"Metadata","type":"object"},"message":{"title":"Message","type":"string"}},"required":["message"],"title":"TextArenaAction","type":"object"}`)
}

// ObservationSchema is the schema of TextArenaObservation, with the
// definition of the TextArenaMessage its messages refer to (pydantic's
// model_json_schema puts it under $defs, sorted first).
func (f *EnvironmentFactory) ObservationSchema() json.RawMessage {
	return json.RawMessage(`{"$defs":{"TextArenaMessage":{"description":"Single message observed by a player.","properties":{"sender_id":{"title":"Sender Id","type":"integer"},"content":{"title":"Content","type":"string"},"category":{"title":"Category","type":"string"}},"required":["sender_id","content","category"],"title":"TextArenaMessage","type":"object"}},"additionalProperties":false,"description":"Observation returned from any TextArena game.","properties":{"done":{"default":false,"title":"Done","type":"boolean"},"reward":{"anyOf":[{"type":"boolean"},{"type":"integer"},{"type":"number"},{"type":"null"}],"default":null,"title":"Reward"},"metadata":{"additionalProperties":true,"title":"Metadata","type":"object"},"prompt":{"title":"Prompt","type":"string"},"messages":{"items":{"$ref":"#/$defs/TextArenaMessage"},"title":"Messages","type":"array"},"current_player_id":{"default":0,"title":"Current Player Id","type":"integer"},"legal_players":{"items":{"type":"integer"},"title":"Legal Players","type":"array"},"info":{"additionalProperties":true,"title":"Info","type":"object"}},"required":["prompt"],"title":"TextArenaObservation","type":"object"}`)
}

// Action is TextArenaAction.
type Action struct {
	Message string `json:"message"`
}

// Message is one TextArena message; Wordle's observation has exactly one,
// holding the whole transcript.
type Message struct {
	SenderID int    `json:"sender_id"`
	Content  string `json:"content"`
	Category string `json:"category"`
}

// Signals are OpenEnv's auxiliary Wordle reward signals.
type Signals struct {
	Greens      pyjson.Float `json:"wordle.greens"`
	Yellows     pyjson.Float `json:"wordle.yellows"`
	Repetitions pyjson.Float `json:"wordle.repetitions"`
	Correct     pyjson.Float `json:"wordle.correct"`
}

// Info is the observation's info object.
type Info struct {
	RewardSignals *Signals `json:"reward_signals,omitempty"`
}

// Observation is TextArenaObservation on the wire, fields in order.
type Observation struct {
	Prompt          string    `json:"prompt"`
	Messages        []Message `json:"messages"`
	CurrentPlayerID int       `json:"current_player_id"`
	LegalPlayers    []int     `json:"legal_players"`
	Info            Info      `json:"info"`
}

// Content is the transcript text (the single message's content).
func (o Observation) Content() string {
	var b strings.Builder
	for _, m := range o.Messages {
		b.WriteString(m.Content)
	}
	return b.String()
}

// Environment is one OpenEnv Wordle session, used from one goroutine at a
// time. It is ready to step before any reset, like the Python env.
type Environment struct {
	dict      *Dictionary
	rng       *rand.Rand
	game      Game
	episodeID *string // nil before the first reset, as TextArenaState's default
	steps     int
	lastInfo  Info
	seen      map[string]int // the signal provider's guess counts
}

// NewEnvironment returns a session drawing secrets from dict with rng.
func NewEnvironment(dict *Dictionary, rng *rand.Rand) *Environment {
	e := &Environment{dict: dict, rng: rng}
	e.start(e.draw(), nil)
	e.episodeID = nil // drawn (the seeds stay as they were) but not yet an episode's
	return e
}

func (e *Environment) draw() string {
	s := e.dict.secrets
	return s[e.rng.IntN(len(s))]
}

func (e *Environment) start(secret string, episodeID *string) {
	e.game.Reset(e.dict, secret)
	id := pyjson.UUID4(e.rng)
	if episodeID != nil {
		id = *episodeID
	}
	e.episodeID, e.steps, e.lastInfo, e.seen = &id, 0, Info{}, map[string]int{}
}

// resetOptions are the reset keys Wordle understands: seed (draws the
// secret reproducibly), episode_id, and our extension secret_word.
type resetOptions struct {
	Seed       *int64  `json:"seed"`
	EpisodeID  *string `json:"episode_id"`
	SecretWord *string `json:"secret_word"`
}

// Reset starts a game: reward 0.0, info {}.
func (e *Environment) Reset(ctx context.Context, opts json.RawMessage) (openenv.Result, error) {
	var o resetOptions
	if len(opts) > 0 {
		if err := json.Unmarshal(opts, &o); err != nil {
			return openenv.Result{}, fmt.Errorf("wordle: reset options: %w", err)
		}
	}
	var secret string
	switch {
	case o.SecretWord != nil:
		w, err := checkSecret(*o.SecretWord)
		if err != nil {
			return openenv.Result{}, err
		}
		secret = w
	case o.Seed != nil:
		secret = SecretForSeed(e.dict, *o.Seed)
	default:
		secret = e.draw()
	}
	e.start(secret, o.EpisodeID)
	return e.result(0, false, Info{})
}

// Step plays the action's message.
func (e *Environment) Step(ctx context.Context, action json.RawMessage) (openenv.Result, error) {
	a, err := ParseAction(action)
	if err != nil {
		return openenv.Result{}, err
	}
	e.game.Step(a.Message)
	e.steps++
	reward := e.game.Reward()
	sig := signals(a.Message, e.game.Transcript(), reward, e.seen)
	e.lastInfo = Info{RewardSignals: &sig}
	return e.result(reward, e.game.Done(), e.lastInfo)
}

func (e *Environment) result(reward float64, done bool, info Info) (openenv.Result, error) {
	b, err := pyjson.Marshal(e.observation(info))
	if err != nil {
		return openenv.Result{}, err
	}
	return openenv.Result{Observation: b, Reward: &reward, Done: done}, nil
}

func (e *Environment) observation(info Info) Observation {
	t := e.game.Transcript()
	prompt := EnvID
	if e.game.Turn() == 0 {
		prompt = strings.TrimSpace(t)
	}
	return Observation{Prompt: prompt, Messages: []Message{{SenderID: -1, Content: t, Category: "MESSAGE"}},
		LegalPlayers: []int{0}, Info: info}
}

// ParseAction validates a TextArenaAction as pydantic does.
func ParseAction(data json.RawMessage) (Action, error) {
	v, err := pyjson.Action(data, "TextArenaAction", "message")
	if err != nil {
		return Action{}, err
	}
	var a Action
	if m, ok := v.Require("message"); ok {
		s, fe := pyjson.String("message", m, 0)
		v.Add(fe...)
		a.Message = s
	}
	return a, v.Err()
}

// SecretForSeed is the secret a seed selects from dict.
func SecretForSeed(dict *Dictionary, seed int64) string {
	r := pyjson.Seeds(uint64(seed), 0)
	return dict.secrets[r.IntN(len(dict.secrets))]
}

// checkSecret accepts a secret given explicitly.
func checkSecret(w string) (string, error) {
	lw := strings.ToLower(w)
	if len(lw) != WordLength || strings.Trim(lw, "abcdefghijklmnopqrstuvwxyz") != "" {
		return "", fmt.Errorf("wordle: secret word %q is not five letters a-z", w)
	}
	return lw, nil
}

var bracketedGuessRE = regexp.MustCompile(`\[[A-Za-z]{5}\]`)

// signals computes OpenEnv's Wordle reward signals exactly as its reward
// provider does: the guess as written in the action (first bracketed
// five-letter word, else the first five letters), the counts of the last
// G/Y/X line of the transcript, how often this guess was made before, and
// the step's reward. seen is updated.
func signals(action, transcript string, reward float64, seen map[string]int) Signals {
	guess := bracketedGuessRE.FindString(action)
	if guess != "" {
		guess = strings.ToLower(guess)
	} else {
		var letters []byte
		for _, c := range []byte(strings.ToLower(action)) {
			if c >= 'a' && c <= 'z' {
				letters = append(letters, c)
			}
		}
		if len(letters) >= 5 {
			guess = "[" + string(letters[:5]) + "]"
		}
	}
	prev := 0
	if guess != "" {
		prev = seen[guess]
		seen[guess] = prev + 1
	}
	greens, yellows := feedbackCounts(transcript)
	return Signals{
		Greens:      pyjson.Float(float64(greens) / 5.0),
		Yellows:     pyjson.Float(float64(yellows) / 5.0),
		Repetitions: pyjson.Float(1.0 - float64(prev)),
		Correct:     pyjson.Float(reward),
	}
}

// feedbackCounts finds the last line of only G, Y and X (spaces aside)
// after the first "Feedback:" and counts its G and Y.
func feedbackCounts(transcript string) (greens, yellows int) {
	content := strings.TrimSpace(transcript)
	_, after, ok := strings.Cut(content, "Feedback:")
	if !ok {
		return 0, 0
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(after), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) < 2 {
		return 0, 0
	}
	for i := len(lines) - 1; i >= 0; i-- {
		n := strings.ReplaceAll(lines[i], " ", "")
		if n != "" && strings.Trim(n, "GYX") == "" {
			return strings.Count(n, "G"), strings.Count(n, "Y")
		}
	}
	return 0, 0
}
