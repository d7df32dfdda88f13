// Char-gated sequence labeller (Rei et al. 2016, "Char attn"): BiLSTM 200, 50-d tanh layer, CRF,
// word and character representations mixed by a learned gate, with the cosine loss. The word-only
// and character-concatenation variants of the blog's comparison are
// char_gated_tagger_words.jsonnet and char_gated_tagger_concat.jsonnet; all three are
// defined in char_gated_tagger.libsonnet (settings, length-bucketed batches, data and the
// CoNLL-2000 overrides there).
(import "char_gated_tagger.libsonnet")("gate")
