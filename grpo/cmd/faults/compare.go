package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/x/grpo"
)

// compareRuns checks that the killed-and-resumed run in got wrote what
// the uninterrupted run in want did (the wordle example's layout).
func compareRuns(want, got string, out io.Writer) error {
	var errs []error
	same := func(rel string) {
		a, err := os.ReadFile(filepath.Join(want, rel))
		if err != nil {
			errs = append(errs, err)
			return
		}
		b, err := os.ReadFile(filepath.Join(got, rel))
		if err != nil {
			errs = append(errs, err)
			return
		}
		// adapter_config.json names its base model's folder: each run's own.
		a = bytes.ReplaceAll(a, []byte(absPath(want)), []byte(absPath(got)))
		if !bytes.Equal(a, b) {
			errs = append(errs, fmt.Errorf("%s differs from the uninterrupted run's", rel))
			return
		}
		fmt.Fprintf(out, "kill: %s: %s identical (%d bytes)\n", filepath.Base(got), rel, len(a))
	}
	for _, rel := range []string{"adapter/adapter_model.safetensors", "adapter/adapter_config.json", "base-model/model.safetensors", "eval.md", "grpo/completions.jsonl"} {
		same(rel)
	}
	for _, sub := range []string{"sft", "grpo"} {
		cks, err := grpo.Checkpoints(filepath.Join(want, sub))
		if err != nil || len(cks) == 0 {
			errs = append(errs, fmt.Errorf("%s: no checkpoint in the uninterrupted run (%v)", sub, err))
			continue
		}
		last := filepath.Join(sub, filepath.Base(cks[len(cks)-1]))
		entries, err := os.ReadDir(cks[len(cks)-1])
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".safetensors") {
				same(filepath.Join(last, e.Name()))
			}
		}
		if err := sameMetrics(filepath.Join(want, sub, grpo.MetricsFile), filepath.Join(got, sub, grpo.MetricsFile)); err != nil {
			errs = append(errs, err)
		} else {
			fmt.Fprintf(out, "kill: %s: %s/%s: every step once, reproducible metrics identical\n", filepath.Base(got), sub, grpo.MetricsFile)
		}
		left, err := temps(filepath.Join(got, sub))
		if err != nil {
			errs = append(errs, err)
		}
		if len(left) > 0 {
			errs = append(errs, fmt.Errorf("%s: temporary checkpoint folders left: %s", sub, strings.Join(left, ", ")))
		}
	}
	return errors.Join(errs...)
}

// sameMetrics compares two metrics logs step by step, leaving out the
// metrics that are not reproducible (wall time, one call's train_loss).
func sameMetrics(want, got string) error {
	a, err := grpo.ReadMetrics(want)
	if err != nil {
		return err
	}
	b, err := grpo.ReadMetrics(got)
	if err != nil {
		return err
	}
	if len(a) != len(b) {
		return fmt.Errorf("%s: %d lines, the uninterrupted run has %d", got, len(b), len(a))
	}
	for i := range a {
		if a[i].Step != b[i].Step {
			return fmt.Errorf("%s: line %d is step %d, want %d", got, i+1, b[i].Step, a[i].Step)
		}
		for k, v := range a[i].Metrics {
			if !grpo.Reproducible(k) {
				continue
			}
			w, ok := b[i].Metrics[k]
			if !ok || !(v == w || v != v && w != w) {
				return fmt.Errorf("%s: step %d %s = %v, the uninterrupted run has %v", got, a[i].Step, k, w, v)
			}
		}
	}
	return nil
}

// temps lists the temporary checkpoint folders in dir.
func temps(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), ".checkpoint-") {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

// absPath is path made absolute (as the runs wrote it), or path itself.
func absPath(path string) string {
	if abs, err := filepath.Abs(path); err == nil {
		return abs
	}
	return path
}
