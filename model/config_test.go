package model

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const minimalConfig = `{"model_type":"qwen3","vocab_size":100,"hidden_size":64,"intermediate_size":128,
"num_hidden_layers":2,"num_attention_heads":4`

func TestParseConfig(t *testing.T) {
	cases := []struct {
		name  string
		json  string
		check func(t *testing.T, c Config)
	}{
		{"defaults", minimalConfig + `}`, func(t *testing.T, c Config) {
			assert.Equal(t, 128, c.HeadDim, "missing head_dim is Qwen3Config's 128, not hidden/heads")
			assert.Equal(t, 4, c.NumKVHeads)
			assert.Equal(t, float32(1e-6), c.RMSNormEps)
			assert.Equal(t, 10000.0, c.RopeTheta)
			assert.False(t, c.TieWordEmbeddings)
			assert.Equal(t, int32(-1), c.BOSTokenID)
			assert.Empty(t, c.EOSTokenIDs)
		}},
		{"null_kv_heads_and_head_dim", minimalConfig + `,"num_key_value_heads":null,"head_dim":null}`, func(t *testing.T, c Config) {
			assert.Equal(t, 4, c.NumKVHeads)
			assert.Equal(t, 128, c.HeadDim)
		}},
		{"gqa_and_head_dim", minimalConfig + `,"num_key_value_heads":1,"head_dim":24,"rms_norm_eps":1e-5,"tie_word_embeddings":true}`, func(t *testing.T, c Config) {
			assert.Equal(t, 1, c.NumKVHeads)
			assert.Equal(t, 24, c.HeadDim)
			assert.Equal(t, 96, c.QDim())
			assert.Equal(t, 24, c.KVDim())
			assert.Equal(t, float32(1e-5), c.RMSNormEps)
			assert.True(t, c.TieWordEmbeddings)
		}},
		{"rope_theta_top_level", minimalConfig + `,"rope_theta":1000000.0,"rope_scaling":null}`, func(t *testing.T, c Config) {
			assert.Equal(t, 1e6, c.RopeTheta)
		}},
		{"rope_parameters_transformers5", minimalConfig + `,"rope_parameters":{"rope_type":"default","rope_theta":500000.0}}`, func(t *testing.T, c Config) {
			assert.Equal(t, 5e5, c.RopeTheta)
		}},
		{"rope_scaling_default_type", minimalConfig + `,"rope_scaling":{"type":"default"},"rope_theta":20000}`, func(t *testing.T, c Config) {
			assert.Equal(t, 2e4, c.RopeTheta)
		}},
		{"eos_list_and_bos", minimalConfig + `,"eos_token_id":[98,99],"bos_token_id":97}`, func(t *testing.T, c Config) {
			assert.Equal(t, []int32{98, 99}, c.EOSTokenIDs)
			assert.Equal(t, int32(97), c.BOSTokenID)
		}},
		{"sliding_window_false_ok", minimalConfig + `,"use_sliding_window":false,"sliding_window":4096,"torch_dtype":"bfloat16"}`, func(t *testing.T, c Config) {
			assert.Equal(t, "bfloat16", c.TorchDType)
		}},
		{"dtype_key_transformers5", minimalConfig + `,"dtype":"float16"}`, func(t *testing.T, c Config) {
			assert.Equal(t, "float16", c.TorchDType)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := ParseConfig([]byte(c.json))
			require.NoError(t, err)
			c.check(t, cfg)
		})
	}
}

func TestParseConfigErrors(t *testing.T) {
	cases := []struct {
		name, json, want string
	}{
		{"not_json", `{`, "parse config.json"},
		{"other_model", `{"model_type":"llama"}`, "model_type"},
		{"missing_hidden", `{"vocab_size":10,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":1}`, "hidden_size is missing"},
		{"sliding_window", minimalConfig + `,"use_sliding_window":true}`, "use_sliding_window"},
		{"rope_scaling_yarn", minimalConfig + `,"rope_scaling":{"rope_type":"yarn","factor":4}}`, "rope_scaling"},
		{"rope_parameters_linear", minimalConfig + `,"rope_parameters":{"rope_type":"linear","rope_theta":1e4}}`, "rope_parameters"},
		{"bad_act", minimalConfig + `,"hidden_act":"gelu"}`, "hidden_act"},
		{"bias", minimalConfig + `,"attention_bias":true}`, "attention_bias"},
		{"gqa_not_divisible", minimalConfig + `,"num_key_value_heads":3}`, "num_key_value_heads"},
		{"zero_layers", `{"vocab_size":10,"hidden_size":8,"intermediate_size":8,"num_hidden_layers":0,"num_attention_heads":1}`, "num_hidden_layers"},
		{"odd_head_dim", minimalConfig + `,"head_dim":15}`, "head_dim"},
		{"negative_eps", minimalConfig + `,"rms_norm_eps":-1}`, "rms_norm_eps"},
		{"eos_out_of_vocab", minimalConfig + `,"eos_token_id":100}`, "eos_token_id"},
		{"eos_string", minimalConfig + `,"eos_token_id":"x"}`, "eos_token_id"},
		{"huge_vocab", `{"vocab_size":1e12,"hidden_size":8,"intermediate_size":8,"num_hidden_layers":1,"num_attention_heads":1}`, "vocab_size"},
		// In config.json's terms, never Go's (no rawConfig, no "Go struct field").
		{"string_hidden", `{"hidden_size":"big"}`, "field hidden_size: want a whole number, have a JSON string"},
		{"string_eps", minimalConfig + `,"rms_norm_eps":"small"}`, "field rms_norm_eps: want a number, have a JSON string"},
		{"number_act", minimalConfig + `,"hidden_act":1}`, "field hidden_act: want a string, have a JSON number"},
		{"garbage", `hello`, "not valid JSON at byte 1"},
		{"a_list", `[1, 2]`, "want a JSON object, have a JSON array"},
		{"empty", ``, "the file is empty"},
		{"cut", `{"hidden_size": 8`, "the JSON ends early"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseConfig([]byte(c.json))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.NotContains(t, err.Error(), "rawConfig")
			assert.NotContains(t, err.Error(), "Go ")
		})
	}
}

func TestConfigJSONRoundTrip(t *testing.T) {
	for _, name := range []string{"tiny", "qwen3-0.6b", "qwen3-1.7b"} {
		t.Run(name, func(t *testing.T) {
			c, err := NamedConfig(name)
			require.NoError(t, err)
			data, err := json.Marshal(c)
			require.NoError(t, err)
			back, err := ParseConfig(data)
			require.NoError(t, err)
			c.TorchDType = "float32"
			assert.Equal(t, c, back)
		})
	}
	_, err := NamedConfig("gpt2")
	assert.Error(t, err)
}

func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(minimalConfig + `}`))
	f.Add([]byte(minimalConfig + `,"rope_parameters":{"rope_type":"default","rope_theta":5e5},"eos_token_id":[1,2]}`))
	f.Add([]byte(`{"num_key_value_heads":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err == nil {
			require.NoError(t, c.Validate())
		}
	})
}
