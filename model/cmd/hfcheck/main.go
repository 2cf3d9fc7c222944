// Command hfcheck is the Go side of the gpu-check's hf stage
// (scripts/hf_interop.py): it loads a Hugging Face Qwen3 folder written by
// transformers' save_pretrained with model.Load on each backend asked for,
// writes the logits of the given tokens as raw little-endian float32
// [T, V] (OUT/<device>_base.f32), then loads a PEFT adapter saved by peft
// (model.LoadAdapter), writes the logits again (OUT/<device>_lora.f32),
// and on the first device re-saves the adapter with model.SaveAdapter
// (OUT/resaved_adapter) for peft to load back.
//
//	hfcheck -model DIR -tokens 1,2,3 -out DIR [-adapter DIR] [-devices cpu,cuda]
//
// Devices are kernels/device names; "cuda" needs a binary built with
// -tags cuda.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/x/kernels/device"
	"github.com/x/model"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "hfcheck:", err)
		os.Exit(1)
	}
}

// options are the command line's.
type options struct {
	model, out, adapter string
	tokens              []int32
	devices             []string
}

func parse(args []string, w io.Writer) (options, error) {
	var o options
	var toks, devs string
	fs := flag.NewFlagSet("hfcheck", flag.ContinueOnError)
	fs.SetOutput(w)
	fs.StringVar(&o.model, "model", "", "Hugging Face Qwen3 folder (config.json, *.safetensors)")
	fs.StringVar(&toks, "tokens", "", "comma-separated token ids")
	fs.StringVar(&o.out, "out", "", "output folder")
	fs.StringVar(&o.adapter, "adapter", "", "PEFT LoRA folder to load after the base logits (optional)")
	fs.StringVar(&devs, "devices", "cpu", "comma-separated kernels/device names")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.model == "" || o.out == "" || toks == "" {
		return o, errors.New("-model, -tokens and -out are required")
	}
	for _, s := range strings.Split(toks, ",") {
		v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
		if err != nil {
			return o, fmt.Errorf("-tokens: %q: %w", s, err)
		}
		o.tokens = append(o.tokens, int32(v))
	}
	for _, d := range strings.Split(devs, ",") {
		if _, err := device.Parse(d); err != nil {
			return o, fmt.Errorf("-devices: %w", err)
		}
		o.devices = append(o.devices, d)
	}
	return o, nil
}

func run(args []string, w io.Writer) error {
	o, err := parse(args, w)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	for i, d := range o.devices {
		if err := onDevice(o, d, i == 0, w); err != nil {
			return fmt.Errorf("%s: %w", d, err)
		}
	}
	return nil
}

// onDevice writes d's base (and adapter) logits; resave re-saves the
// adapter from it.
func onDevice(o options, d string, resave bool, w io.Writer) error {
	be, closeBackend, err := device.Open(d, device.Options{})
	if err != nil {
		return err
	}
	defer func() { _ = closeBackend() }()
	m, err := model.Load(o.model, be)
	if err != nil {
		return err
	}
	defer m.Close()
	name := strings.ReplaceAll(d, ":", "")
	if err := logits(m, o.tokens, filepath.Join(o.out, name+"_base.f32")); err != nil {
		return fmt.Errorf("base logits: %w", err)
	}
	fmt.Fprintf(w, "%s: base logits of %d tokens\n", d, len(o.tokens))
	if o.adapter == "" {
		return nil
	}
	cfg, err := model.LoadAdapter(o.adapter, m)
	if err != nil {
		return err
	}
	if err := logits(m, o.tokens, filepath.Join(o.out, name+"_lora.f32")); err != nil {
		return fmt.Errorf("adapter logits: %w", err)
	}
	fmt.Fprintf(w, "%s: adapter logits (r %d, alpha %g, %v)\n", d, cfg.R, cfg.Alpha, cfg.Targets)
	if resave {
		if err := model.SaveAdapter(filepath.Join(o.out, "resaved_adapter"), m, cfg, o.model); err != nil {
			return err
		}
	}
	return nil
}

// logits writes m's logits of every position of ids to path.
func logits(m *model.Model, ids []int32, path string) error {
	lg, err := m.Logits(ids, model.Options{})
	if err != nil {
		return err
	}
	buf := make([]byte, 4*len(lg))
	for i, v := range lg {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(v))
	}
	return os.WriteFile(path, buf, 0o644)
}
