// Package ckpt gives the examples their checkpoint flags, -save-steps and
// -resume, and applies them to the trainers: a run killed at any moment
// continues from its newest checkpoint, and ends as the uninterrupted run
// would have (README, "Reliability").
package ckpt

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"

	"github.com/x/grpo"
)

// Flags are the parsed checkpoint flags.
type Flags struct {
	// SaveSteps is how often (optimizer steps) a checkpoint is written; 0
	// writes none.
	SaveSteps int
	// Resume continues from the newest checkpoint under the output folder.
	Resume bool
}

// Register defines -save-steps and -resume on fs.
func Register(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.IntVar(&f.SaveSteps, "save-steps", 0, "write a checkpoint into the output folder every this many optimizer steps, of the warm start and of GRPO (0: none)")
	fs.BoolVar(&f.Resume, "resume", false, "continue a stopped or killed run from the newest checkpoint in the output folder (a fresh start when there is none)")
	return f
}

// Check reports a bad flag value.
func (f *Flags) Check() error {
	if f.SaveSteps < 0 {
		return fmt.Errorf("-save-steps %d is negative", f.SaveSteps)
	}
	return nil
}

// GRPO sets cfg's checkpoint interval.
func (f *Flags) GRPO(cfg *grpo.Config) { cfg.SaveSteps = f.SaveSteps }

// SFT sets sc's checkpoint interval and, when resuming and sc.OutputDir
// holds a checkpoint, resumes the warm start from the newest.
func (f *Flags) SFT(sc *grpo.SFTConfig) error {
	sc.SaveSteps = f.SaveSteps
	if !f.Resume || sc.OutputDir == "" {
		return nil
	}
	switch _, err := grpo.LatestCheckpoint(sc.OutputDir); {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("resume the warm start: %w", err)
	}
	sc.ResumeFrom = "latest"
	return nil
}

// ResumeGRPO, when resuming, restores tr from the newest checkpoint under
// its OutputDir (none: a fresh start) and says which on out.
func (f *Flags) ResumeGRPO(tr *grpo.Trainer, out io.Writer) error {
	if !f.Resume {
		return nil
	}
	dir, err := grpo.LatestCheckpoint(tr.Config().OutputDir)
	if errors.Is(err, fs.ErrNotExist) {
		fmt.Fprintf(out, "resume: no checkpoint in %s, starting afresh\n", tr.Config().OutputDir)
		return nil
	}
	if err != nil {
		return fmt.Errorf("resume: %w", err)
	}
	if err := tr.Resume(dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "resume: from %s (step %d)\n", dir, tr.State().GlobalStep)
	return nil
}
