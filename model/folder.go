package model

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// checkFolder reports, in the terms of someone pointing at a download, why
// dir is not a Hugging Face Qwen3 folder: it does not exist, is a file, or
// lacks config.json or the weights. A folder with both is left to the
// parsers.
func checkFolder(dir string) error {
	const want = "want a Hugging Face Qwen3 folder: config.json and model.safetensors (or shards with model.safetensors.index.json), e.g. from `huggingface-cli download Qwen/Qwen3-0.6B --local-dir DIR`"
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("model: folder %s does not exist (%s)", dir, want)
	case err != nil:
		return fmt.Errorf("model: folder %s: %w", dir, err)
	case !st.IsDir():
		return fmt.Errorf("model: %s is a file, not a folder (%s)", dir, want)
	}
	var missing []string
	if _, err := os.Stat(filepath.Join(dir, "config.json")); errors.Is(err, os.ErrNotExist) {
		missing = append(missing, "config.json")
	}
	shards, _ := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	if len(shards) == 0 {
		missing = append(missing, "*.safetensors")
	}
	switch len(missing) {
	case 0:
		return nil
	case 2:
		return fmt.Errorf("model: folder %s has neither config.json nor *.safetensors (%s)", dir, want)
	}
	return fmt.Errorf("model: folder %s has no %s (%s)", dir, missing[0], want)
}
