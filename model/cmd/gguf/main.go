// Command gguf writes a Qwen3 checkpoint (a Hugging Face folder:
// config.json + model.safetensors), optionally with a PEFT LoRA adapter
// merged in, as a GGUF file that llama.cpp and ollama load, the way
// llama.cpp's convert_hf_to_gguf.py writes Qwen3ForCausalLM (see
// model.WriteGGUF):
//
//	go run ./model/cmd/gguf -model DIR -out F.gguf [-adapter DIR] [-tokenizer DIR] [-name NAME]
//
// The tokenizer metadata comes from tokenizer.json (and, when present,
// tokenizer_config.json and config.json) in -tokenizer, which defaults to
// -model; a random checkpoint written by model/cmd/bench -random has no
// tokenizer, so point -tokenizer at a folder with Qwen3's tokenizer.json
// (make setup puts one in .cache/qwen3-tokenizer).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/x/kernels/ref"
	"github.com/x/model"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "gguf:", err)
		}
		os.Exit(2)
	}
}

// run is the command with its arguments and outputs, for tests.
func run(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("gguf", flag.ContinueOnError)
	fs.SetOutput(stderr)
	modelDir := fs.String("model", "", "Hugging Face Qwen3 folder (config.json + model.safetensors)")
	out := fs.String("out", "", "GGUF file to write")
	adapter := fs.String("adapter", "", "PEFT LoRA adapter folder to merge into the weights first (optional)")
	tokDir := fs.String("tokenizer", "", "folder with tokenizer.json (default: -model)")
	name := fs.String("name", "", "general.name (default: Qwen3)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if *modelDir == "" || *out == "" {
		return errors.New("-model and -out are required")
	}
	if *tokDir == "" {
		*tokDir = *modelDir
	}
	// The weights are only read and written, never run: the reference
	// backend needs no threads.
	m, err := model.Load(*modelDir, ref.Backend{})
	if err != nil {
		return err
	}
	defer m.Close()
	if *adapter != "" {
		cfg, err := model.LoadAdapter(*adapter, m)
		if err != nil {
			return err
		}
		if err := model.MergeLoRA(m); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "merged LoRA adapter %s (rank %d, alpha %g)\n", *adapter, cfg.R, cfg.Alpha)
	}
	ctx, err := model.GGUFContextLength(*modelDir)
	if err != nil {
		return err
	}
	vocab, err := model.ReadGGUFVocab(*tokDir, m.Config.VocabSize)
	if err != nil {
		return err
	}
	if err := model.WriteGGUF(*out, m, model.GGUFOptions{Name: *name, ContextLength: ctx, Vocab: vocab}); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: qwen3, %d layers, %v weights, %d tokens, %.1f MiB\n",
		*out, m.Config.NumLayers, m.DType, len(vocab.Tokens), float64(st.Size())/(1<<20))
	return nil
}
