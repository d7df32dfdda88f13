// Word-only variant of char_gated_tagger.jsonnet (the blog's "Word-based" column): the same
// BiLSTM-CRF over word embeddings alone. See char_gated_tagger.libsonnet.
(import "char_gated_tagger.libsonnet")("words")
