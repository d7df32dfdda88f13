// seq2biseq_pos.jsonnet on conll2000_pos (training_config/data.libsonnet).
(import "../data.libsonnet").on((import "../seq2biseq_pos.jsonnet").fixture_config, "conll2000_pos")
