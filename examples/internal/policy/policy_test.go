package policy

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/x/kernels/cpu"
	"github.com/x/model"
	"github.com/x/tokenizer"
)

func TestEmbeddedSavesAndReloads(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	p, err := Load(Options{Hidden: 32, Seed: 3}, be)
	require.NoError(t, err)
	assert.True(t, p.Embedded())
	assert.Equal(t, tokenizer.Tiny().VocabSize(), p.Model.Config.VocabSize)
	assert.Equal(t, []int32{tokenizer.Tiny().EOS()}, p.Model.Config.EOSTokenIDs, "a turn ends on <|im_end|> of the tiny tokenizer")
	assert.Equal(t, 32, p.Model.Config.HiddenSize)

	dir := filepath.Join(t.TempDir(), "saved")
	require.NoError(t, p.Save(dir))
	tmp := p.Dir
	p.Close()
	_, err = os.Stat(tmp)
	assert.True(t, os.IsNotExist(err), "Close removes the embedded model's folder")

	q, err := Load(Options{Dir: dir}, be)
	require.NoError(t, err)
	defer q.Close()
	assert.False(t, q.Embedded())
	assert.Equal(t, 32, q.Model.Config.HiddenSize)
	assert.Equal(t, tokenizer.Tiny().VocabSize(), q.Tokenizer.VocabSize())
}

func TestLoadErrors(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	_, err := Load(Options{Dir: t.TempDir()}, be)
	assert.ErrorContains(t, err, "tokenizer.json")
	_, err = Load(Options{Hidden: -1}, be)
	assert.ErrorContains(t, err, "negative")
}

func TestParams(t *testing.T) {
	c, err := model.NamedConfig("tiny")
	require.NoError(t, err)
	c.VocabSize = 4096
	// embeddings 4096·128 (tied) + 4 layers of q,k,v,o (128·128, 128·64 twice, 128·128),
	// MLP 3·128·384, norms 2·128 + 2·32, and the final norm.
	want := 4096*128 + 4*(128*128+2*128*64+128*128+3*128*384+2*128+2*32) + 128
	assert.Equal(t, want, Params(c))
}
