// char_gated_tagger_concat.jsonnet ([x; m]) on CoNLL-2000 chunking. See data.libsonnet.
(import "data.libsonnet").on(import "../char_gated_tagger_concat.jsonnet", "conll2000_chunking")
