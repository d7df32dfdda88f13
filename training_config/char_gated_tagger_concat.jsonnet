// Character-concatenation variant of char_gated_tagger.jsonnet (the blog's "Char concat"):
// [x; m] instead of the gate, no cosine loss. See char_gated_tagger.libsonnet.
(import "char_gated_tagger.libsonnet")("concatenate")
