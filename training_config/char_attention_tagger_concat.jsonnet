// Character-concatenation variant of char_attention_tagger.jsonnet (the blog's "Char concat"):
// [x; m] instead of the gate, no cosine loss. See char_attention_tagger.libsonnet.
(import "char_attention_tagger.libsonnet")("concatenate")
