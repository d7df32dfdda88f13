// Word-only variant of char_attention_tagger.jsonnet (the blog's "Word-based" column): the same
// BiLSTM-CRF over word embeddings alone. See char_attention_tagger.libsonnet.
(import "char_attention_tagger.libsonnet")("words")
