package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels"
)

// shapeCase is a random checkpoint of a shape the reference vectors do not
// cover.
type shapeCase struct {
	name  string
	cfg   Config
	dtype kernels.DType
}

func shapeCases() []shapeCase {
	base := func(v, c, f, l, h, kvh, d int, theta float64, eps float32, tied bool) Config {
		return Config{VocabSize: v, HiddenSize: c, IntermediateSize: f, NumLayers: l, NumHeads: h, NumKVHeads: kvh,
			HeadDim: d, RopeTheta: theta, RMSNormEps: eps, TieWordEmbeddings: tied, BOSTokenID: -1, EOSTokenIDs: []int32{int32(v - 1)}}
	}
	return []shapeCase{
		// head_dim 16 ≠ hidden/heads = 12, untied lm_head, bf16 storage.
		{"untied_bf16_D16xH4_C48", base(96, 48, 80, 2, 4, 2, 16, 1e6, 1e-5, false), kernels.BF16},
		// GQA 4:1 with head_dim 8 ≠ 32/8, f16 storage, odd theta and eps.
		{"gqa4_f16_H8_KVH2_D8", base(80, 32, 64, 2, 8, 2, 8, 5e5, 1e-6, true), kernels.F16},
		// multi-head (no sharing), f32, a small theta so positions rotate fast.
		{"mha_f32_H3_D10", base(70, 24, 40, 3, 3, 3, 10, 100, 1e-4, false), kernels.F32},
	}
}

// randomModel writes and loads a random checkpoint of sc (std 0.1 so that
// logits are far from uniform and greedy decoding does not just repeat).
func randomModel(t *testing.T, sc shapeCase, b kernels.Backend) *Model {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, WriteRandom(dir, sc.cfg, sc.dtype, 7, RandomOptions{Std: 0.1, NormStd: 0.1}))
	m, err := Load(dir, b)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, m.Close()) })
	require.Equal(t, sc.dtype, m.Embed.DType)
	return m
}

func randomTokens(rng *rand.Rand, n, v int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(v))
	}
	return out
}

// Float32 forwards that differ only in how tokens are grouped into calls
// (cache vs full, chunks, batches) reorder no sums inside a row of any
// kernel except attention's over positions; 2e-5 abs + 1e-4 rel covers it
// with room, and is still far below any real bug (wrong position, wrong
// cache row), which moves logits by ~1e-1.
const invAtol, invRtol = 2e-5, 1e-4

func TestCacheDecodeEqualsFullForward(t *testing.T) {
	for _, tb := range inferBackends(t) {
		for _, sc := range shapeCases() {
			t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
				m := randomModel(t, sc, tb.b)
				V := m.Config.VocabSize
				toks := randomTokens(rand.New(rand.NewPCG(1, 2)), 11, V)
				full, err := m.Logits(toks, Options{})
				require.NoError(t, err)

				// Prefill 4, then one token at a time.
				r := m.NewRunner()
				var c KVCache
				h := r.Forward([]*KVCache{&c}, [][]int32{toks[:4]})
				assertClose32(t, r.Logits(h, 4), full[:4*V], invAtol, invRtol, "prefill logits")
				for i := 4; i < len(toks); i++ {
					h := r.Forward([]*KVCache{&c}, [][]int32{toks[i : i+1]})
					assertClose32(t, r.Logits(h, 1), full[i*V:(i+1)*V], invAtol, invRtol, "decode logits")
				}
				assert.Equal(t, len(toks), c.Len)

				// Chunked prefill (3+5+3) equals one prefill.
				var c2 KVCache
				for _, span := range [][2]int{{0, 3}, {3, 8}, {8, 11}} {
					h := r.Forward([]*KVCache{&c2}, [][]int32{toks[span[0]:span[1]]})
					n := span[1] - span[0]
					assertClose32(t, r.Logits(h, n), full[span[0]*V:span[1]*V], invAtol, invRtol, "chunked prefill")
				}

				// Greedy decoding through Generate equals the argmax of full logits.
				seq := NewSequence(3, toks[:5]...)
				out, err := m.Generate(t.Context(), []Request{{Seq: seq, MaxNewTokens: 6}}, BatchOptions{})
				require.NoError(t, err)
				all, err := m.Logits(seq.Tokens, Options{})
				require.NoError(t, err)
				for i, id := range out[0].Tokens {
					p := 5 + i - 1
					want, err := tb.b.Argmax(kernels.HostF32(all[p*V : (p+1)*V]))
					require.NoError(t, err)
					assert.Equal(t, want, id, "greedy token %d", i)
				}
			})
		}
	}
}

func TestBatchEqualsSequencesAlone(t *testing.T) {
	for _, tb := range inferBackends(t) {
		for _, sc := range shapeCases()[:2] {
			t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
				m := randomModel(t, sc, tb.b)
				V := m.Config.VocabSize
				rng := rand.New(rand.NewPCG(5, 6))
				lens := []int{7, 1, 13, 4}
				var seqs [][]int32
				var alone [][]float32
				for _, n := range lens {
					toks := randomTokens(rng, n, V)
					seqs = append(seqs, toks)
					l, err := m.Logits(toks, Options{})
					require.NoError(t, err)
					alone = append(alone, l)
				}
				// One ragged step over every sequence's prompt, then a
				// ragged decode step where each sequence adds one token.
				r := m.NewRunner()
				caches := make([]*KVCache, len(seqs))
				feeds := make([][]int32, len(seqs))
				for i := range seqs {
					caches[i] = new(KVCache)
					feeds[i] = seqs[i][:len(seqs[i])-1]
				}
				h := r.Forward(caches, feeds)
				logits := r.Logits(h, len(h)/m.Config.HiddenSize)
				row := 0
				for i, s := range seqs {
					n := len(s) - 1
					assertClose32(t, logits[row*V:(row+n)*V], alone[i][:n*V], invAtol, invRtol, "batched prefill")
					row += n
					feeds[i] = s[n:]
				}
				// An empty token list contributes no rows.
				h = r.Forward(append(caches, new(KVCache)), append(feeds, nil))
				logits = r.Logits(h, len(seqs))
				for i, s := range seqs {
					n := len(s)
					assertClose32(t, logits[i*V:(i+1)*V], alone[i][(n-1)*V:n*V], invAtol, invRtol, "batched decode")
				}
			})
		}
	}
}

func TestLoRAUnmergedEqualsMerged(t *testing.T) {
	for _, tb := range inferBackends(t) {
		sc := shapeCases()[0]
		t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
			m := randomModel(t, sc, tb.b)
			toks := randomTokens(rand.New(rand.NewPCG(9, 9)), 9, m.Config.VocabSize)
			base, err := m.Logits(toks, Options{})
			require.NoError(t, err)

			// B = 0 (PEFT's initialisation): the adapter is a no-op.
			rng := rand.New(rand.NewPCG(3, 4))
			const r = 3
			for li := range m.Layers {
				for _, nl := range m.Layers[li].Linears() {
					lin := nl.Linear
					a := &LoRA{A: make([]float32, r*lin.In()), B: make([]float32, lin.Out()*r), R: r, Scaling: 8 / math.Sqrt2}
					for i := range a.A {
						a.A[i] = float32(rng.NormFloat64() * 0.2)
					}
					lin.LoRA = a
				}
			}
			zeroB, err := m.Logits(toks, Options{})
			require.NoError(t, err)
			assert.Equal(t, base, zeroB, "LoRA with B = 0 changes nothing")

			for li := range m.Layers {
				for _, nl := range m.Layers[li].Linears() {
					for i := range nl.Linear.LoRA.B {
						nl.Linear.LoRA.B[i] = float32(rng.NormFloat64() * 0.2)
					}
				}
			}
			unmerged, err := m.Logits(toks, Options{})
			require.NoError(t, err)
			off, err := m.Logits(toks, Options{NoAdapters: true})
			require.NoError(t, err)
			assert.Equal(t, base, off, "NoAdapters ignores attached adapters")

			// Merge W + scaling·B·A in float64 into F32 weights.
			for li := range m.Layers {
				for _, nl := range m.Layers[li].Linears() {
					lin := nl.Linear
					out, in, a := lin.Out(), lin.In(), lin.LoRA
					w := make([]float32, out*in)
					for i := range out {
						for j := range in {
							s := float64(lin.W.At(i, j))
							for k := range a.R {
								s += float64(a.Scaling) * float64(a.B[i*a.R+k]) * float64(a.A[k*in+j])
							}
							w[i*in+j] = float32(s)
						}
					}
					lin.W, lin.LoRA = kernels.MatF32(w, out, in), nil
				}
			}
			merged, err := m.Logits(toks, Options{})
			require.NoError(t, err)
			// The merged weights are rounded to float32 once; the
			// unmerged path rounds x·Aᵀ instead: agreement to ~1e-5.
			assertClose32(t, unmerged, merged, 5e-5, 1e-4, "unmerged vs merged")
			diff := 0.0
			for i := range base {
				diff = math.Max(diff, math.Abs(float64(base[i]-merged[i])))
			}
			assert.Greater(t, diff, 1e-2, "the adapter must actually change the logits")
		})
	}
}

// widen returns w as an F32 Mat holding exactly the same values.
func widen(w kernels.Mat) kernels.Mat {
	out := make([]float32, w.Len())
	for i := range w.Rows {
		w.Row(out[i*w.Cols:(i+1)*w.Cols], i)
	}
	return kernels.MatF32(out, w.Rows, w.Cols)
}

func TestHalfWeightsEqualWidenedF32(t *testing.T) {
	for _, tb := range inferBackends(t) {
		for _, sc := range shapeCases()[:2] { // bf16 and f16
			t.Run(tb.name+"/"+sc.name, func(t *testing.T) {
				m := randomModel(t, sc, tb.b)
				toks := randomTokens(rand.New(rand.NewPCG(4, 5)), 10, m.Config.VocabSize)
				half, err := m.Logits(toks, Options{})
				require.NoError(t, err)
				w := *m
				w.Layers = append([]Layer(nil), m.Layers...)
				w.Embed = widen(m.Embed)
				w.LMHead = widen(m.LMHead)
				for i := range w.Layers {
					for _, nl := range w.Layers[i].Linears() {
						nl.Linear.W = widen(nl.Linear.W)
					}
				}
				full, err := w.Logits(toks, Options{})
				require.NoError(t, err)
				// Same weight values, float32 accumulation both ways.
				assertClose32(t, half, full, invAtol, invRtol, sc.dtype.String()+" vs widened F32")
			})
		}
	}
}
