// char_gated_tagger.jsonnet on conll2000_chunking (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../char_gated_tagger.jsonnet").fixture_config, "conll2000_chunking")
