// char_gated_tagger_words.jsonnet (words only) on CoNLL-2000 chunking. See data.libsonnet.
(import "data.libsonnet").on(import "../char_gated_tagger_words.jsonnet", "conll2000_chunking")
