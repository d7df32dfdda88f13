// char_gated_tagger.jsonnet (gate) on CoNLL-2000 chunking, GloVe 6B 50d. See data.libsonnet.
(import "data.libsonnet").on(import "../char_gated_tagger.jsonnet", "conll2000_chunking")
