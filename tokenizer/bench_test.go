package tokenizer

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// benchCorpus is a deterministic mixed text of at least 1 MiB: English
// prose, Go/Python code, numbers, Chinese, emoji, and runs of white space.
func benchCorpus() string {
	r := rand.New(rand.NewPCG(1, 1))
	pick := func(l []string) string { return l[r.IntN(len(l))] }
	words, code := corpusWords(), corpusCode()
	cjk := []rune("的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平真听世气信北少关并内加化由却代军产入先山五太水万市眼体别处总才场师书比住员九笑性通目华报立马命张活难神数件安表原车白应路期叫死常提感金何更反合放做系")
	emoji := []string{"😀", "🎲", "👍🏽", "🇫🇷", "🚀", "✅", "❤️"}
	var b strings.Builder
	for b.Len() < 1<<20 {
		switch r.IntN(6) {
		case 0, 1: // prose
			for range 3 + r.IntN(5) {
				n := 5 + r.IntN(15)
				for i := range n {
					w := pick(words)
					if i == 0 {
						w = strings.ToUpper(w[:1]) + w[1:]
					}
					b.WriteString(w)
					if i < n-1 {
						b.WriteString(pick([]string{" ", " ", " ", ", "}))
					}
				}
				b.WriteString(pick([]string{". ", "? ", "! ", ".\n"}))
			}
		case 2: // code
			b.WriteString(pick(code))
			fmt.Fprintf(&b, "\tx%d := compute(%d, %q)\n\n", r.IntN(100), r.IntN(1e6), pick(words))
		case 3: // numbers
			fmt.Fprintf(&b, "%d,%03d.%02d and %.5f; id=%x, %d%%\n", r.IntN(1000), r.IntN(1000), r.IntN(100), r.Float64()*1e4, r.Uint32(), r.IntN(100))
		case 4: // Chinese with emoji
			for range 10 + r.IntN(40) {
				b.WriteRune(cjk[r.IntN(len(cjk))])
			}
			b.WriteString(pick([]string{"，", "。", "！", emoji[r.IntN(len(emoji))]}))
		case 5: // white-space runs
			b.WriteString(strings.Repeat(" ", r.IntN(12)))
			b.WriteString(pick([]string{"\n", "\t\t", "\n\n\n", "\r\n", "  \n  "}))
		}
	}
	return b.String()
}

// BenchmarkEncode measures encode throughput on one core (MB/s from
// SetBytes). "warm" reuses the word cache across iterations, as a trainer
// encoding similar text does; "cold" empties it before each pass.
func BenchmarkEncode(b *testing.B) {
	corpus := benchCorpus()
	for _, tc := range []struct {
		name string
		tok  *Tokenizer
		cold bool
	}{
		{"qwen3/warm", qwen3(b), false},
		{"qwen3/cold", qwen3(b), true},
		{"tiny/warm", Tiny(), false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(corpus)))
			n := 0
			cpu0 := cpuTime(b)
			for b.Loop() {
				if tc.cold {
					tc.tok.cache = newWordCache()
				}
				n = len(tc.tok.Encode(corpus))
			}
			cpu := (cpuTime(b) - cpu0).Seconds()
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			// On a shared machine wall time includes waiting for a core;
			// process CPU time (GC included) is the single-core cost.
			b.ReportMetric(float64(len(corpus))*float64(b.N)/cpu/1e6, "cpu-MB/s")
			b.ReportMetric(float64(len(corpus))/float64(n), "bytes/tok")
		})
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkDecode(b *testing.B) {
	tok := qwen3(b)
	ids := tok.Encode(benchCorpus())
	b.SetBytes(int64(len(tok.Decode(ids, false))))
	for b.Loop() {
		_ = tok.Decode(ids, false)
	}
	b.ReportMetric(float64(len(ids))*float64(b.N)/b.Elapsed().Seconds(), "tok/s")
}

func TestBenchCorpus(t *testing.T) {
	c := benchCorpus()
	if len(c) < 1<<20 || c != benchCorpus() {
		t.Fatalf("bench corpus must be >= 1 MiB and deterministic (len %d)", len(c))
	}
	tok := Tiny()
	if got := tok.Decode(tok.Encode(c), false); got != c {
		t.Fatal("bench corpus does not round-trip")
	}
}
