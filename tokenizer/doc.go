// Package tokenizer implements the byte-level BPE tokenizers of the Qwen
// family (Qwen2, 2.5, 3; GPT-2 style files also load) and Qwen3's chat
// template, for the GRPO trainer: token ids in and out, never re-tokenizing
// what a model generated.
//
// # Tokenizer
//
// Load or Parse reads a Hugging Face tokenizer.json; Encode and Decode match
// Hugging Face's output on the reference vectors and on random text
// (testdata/). Token ids are int32. Encode adds no special tokens. A
// Tokenizer is safe for concurrent use.
//
// Encoding follows Hugging Face's pipeline: added tokens (<|im_end|>,
// <think>, ...) are matched leftmost-longest on the raw text and take their
// own ids; the text between them is NFC-normalized, split by the
// pre-tokenizer regex, mapped byte-to-unicode, and merged by BPE.
//
// # What comes from sugarme/tokenizer and what is ours
//
// github.com/sugarme/tokenizer v0.3.0 cannot load Qwen3's tokenizer.json: it
// panics compiling the split regex (RE2 has no `(?!\S)`), its `\s` is ASCII
// only, its ByteLevel step ignores use_regex: false and re-splits, its NFC is
// really NFD, it drops or renumbers added tokens, and it does not merge
// equal-rank pairs leftmost-first. From it this package uses the byte-level
// byte↔rune table (GenerateBytesChar), which is correct. Written here:
//   - the JSON loader, which rejects what it does not implement with an
//     error (never a panic);
//   - a hand-written scanner equivalent to Qwen's split regex (and GPT-2's),
//     with the look-ahead, leftmost-first alternation, \p{L}, \p{N} and
//     Unicode White_Space for \s;
//   - NFC via golang.org/x/text/unicode/norm;
//   - BPE with a merge map keyed by the pair of ids, lowest rank first and
//     the leftmost pair among equal ranks, a per-word cache, and a priority
//     queue for long words;
//   - Hugging Face's lossy UTF-8 decoding (one U+FFFD per maximal invalid
//     subpart);
//   - a deterministic BPE trainer (TrainBPE) for the tiny tokenizer, so the
//     committed file is reproducible byte for byte.
//
// # Tiny tokenizer
//
// Tiny returns an embedded 4,096-id byte-level BPE with Qwen3's added tokens
// (same strings and special flags), trained by TrainTiny on text this
// package generates. It is a standard tokenizer.json (TinyJSON) that Hugging
// Face loads; `go generate ./tokenizer/` rebuilds it.
//
// # Chat template
//
// Chat renders conversations exactly as Qwen3's chat template (string-equal
// to Hugging Face's apply_chat_template), including tools, tool calls with
// object or string arguments, grouped tool responses, reasoning, and
// enable_thinking. RenderOptions.KeepAllReasoning selects the training
// variant that keeps every turn's <think> block, under which a multi-turn
// rollout is the plain concatenation of prompt ids, generated ids and
// ToolSuffixIDs. ParseAssistant turns generated ids into a Message with
// reasoning, content and tool calls, falling back to plain content when a
// call is malformed.
package tokenizer
